// oar/ops/pool2d.hpp: pool2d, max or average pooling over the H and W axes of NCHW images (Fluid's pool2d:
// ksize/strides/paddings windows, global pooling, ceil_mode, exclusive averages).
#pragma once
#include "oar/ops/conv2d.hpp"

namespace oar::ops {

/// Out[n, c, i, j] = max or mean of X[n, c, h, w] over the window h in [i*s0 - p0, i*s0 - p0 + k0) ∩ [0, H), w likewise.
/// X: [N, C, H, W] -> Out: [N, C, H', W'], H' = (H - k0 + 2p0) / s0 + 1 (ceil_mode: (H - k0 + 2p0 + s0 - 1) / s0 + 1).
/// avg divides by the window's in-image size when exclusive, else by k0*k1. global_pooling: k = [H, W], p = 0.
struct Pool2d {
  static OpDef def() {
    return OpDef("pool2d", "max or average pooling of NCHW images")
        .in("X").out("Out")
        .attr("pooling_type", std::string("max")).check<std::string>([](const std::string& t) { return t == "max" || t == "avg"; }, "must be 'max' or 'avg'")
        .required_attr<std::vector<int32_t>>("ksize").check<std::vector<int32_t>>(detail::pair_at_least(1), "must be two values >= 1")
        .attr("global_pooling", false)
        .attr("strides", std::vector<int32_t>{1, 1}).check<std::vector<int32_t>>(detail::pair_at_least(1), "must be two values >= 1")
        .attr("paddings", std::vector<int32_t>{0, 0}).check<std::vector<int32_t>>(detail::pair_at_least(0), "must be two values >= 0")
        .attr("ceil_mode", false)
        .attr("exclusive", true, "avg: divide by the number of in-image elements of the window")
        .attr("adaptive", false, "not supported")
        .attr("use_cudnn", true, "ignored on the CPU")
        .attr("data_format", std::string("NCHW"), "only NCHW (or Fluid's AnyLayout)");
  }
  /// Output extent along one axis (-1 when unknown).
  static int64_t out_size(int64_t in, int64_t k, int64_t p, int64_t s, bool ceil_mode) {
    if (in < 0) return -1;
    return ceil_mode ? (in - k + 2 * p + s - 1) / s + 1 : (in - k + 2 * p) / s + 1;
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& x = c.shape("X");
    auto k = c.attr<std::vector<int32_t>>("ksize");
    auto s = c.attr<std::vector<int32_t>>("strides");
    auto p = c.attr<std::vector<int32_t>>("paddings");
    bool global = c.attr<bool>("global_pooling"), ceil_mode = c.attr<bool>("ceil_mode");
    std::string layout = c.attr<std::string>("data_format");
    c.check(detail::is_nchw(layout), "data_format '{}' is not supported (only NCHW)", layout);
    c.check(!c.attr<bool>("adaptive"), "adaptive pooling is not supported");
    c.check(x.rank() == 4, "X must be [N, C, H, W], got {}", x.str());
    c.check(is_float(c.dtype("X")), "X must be a float tensor, got {}", name(c.dtype("X")));
    Shape out{x[0], x[1], -1, -1};
    for (int i = 0; i < 2; ++i) {
      if (global) {
        out[2 + i] = x[2 + i] < 0 ? -1 : 1;
        continue;
      }
      if (x[2 + i] < 0) continue;
      int64_t o = out_size(x[2 + i], k[size_t(i)], p[size_t(i)], s[size_t(i)], ceil_mode);
      c.check(o > 0, "output size {} <= 0: X {} with ksize {}, strides {}, paddings {}", o, x.str(), detail::ints_str(k), detail::ints_str(s),
              detail::ints_str(p));
      out[2 + i] = o;
    }
    c.set_output("Out", out, c.dtype("X"));
  }
  /// pool2d_grad(X, Out, Out@GRAD) -> X@GRAD: max sends each gradient to the window's first maximum, avg spreads it.
  static std::vector<Operator> grad(const GradContext& g) { return {g.default_grad(true)}; }
  static void eval_cpu(KernelContext&);       // kernels/cpu/pool2d.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/pool2d.hpp
};

}  // namespace oar::ops
