// oar/ops/pool2d.hpp: pool2d, max or average pooling over the H and W axes of NCHW images (Fluid's pool2d:
// ksize/strides/paddings windows, global pooling, ceil_mode, exclusive averages).
#pragma once
#include "oar/ops/conv2d.hpp"

namespace oar::ops {

/// Out[n, c, i, j] = max or mean of X[n, c, h, w] over the window h in [i*s0 - p0, i*s0 - p0 + k0) ∩ [0, H), w likewise.
/// X: [N, C, H, W] -> Out: [N, C, H', W'], H' = (H - k0 + 2p0) / s0 + 1 (ceil_mode: (H - k0 + 2p0 + s0 - 1) / s0 + 1).
/// avg divides by the window's in-image size when exclusive, else by k0*k1. global_pooling: k = [H, W], p = 0.
struct Pool2d {
  static constexpr std::string_view type = "pool2d";
  static constexpr Slot x{"X"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<std::string> pooling_type{"pooling_type"}, data_format{"data_format"};
  static constexpr Attr<std::vector<int32_t>> ksize{"ksize"}, strides{"strides"}, paddings{"paddings"};
  static constexpr Attr<bool> global_pooling{"global_pooling"}, ceil_mode{"ceil_mode"}, exclusive{"exclusive"}, adaptive{"adaptive"},
      use_cudnn{"use_cudnn"};

  enum class PoolingType { max, avg };

  /// What the kernels read, decoded once when a program is prepared (pooling_type and data_format are checked here).
  struct Attrs {
    PoolingType pooling_type;
    std::array<int32_t, 2> ksize, strides, paddings;
    bool global_pooling, ceil_mode, exclusive, adaptive;
    explicit Attrs(const AttrReader& r)
        : pooling_type(decode_pooling_type(r)),
          ksize(r.array<2>(Pool2d::ksize)),
          strides(r.array<2>(Pool2d::strides)),
          paddings(r.array<2>(Pool2d::paddings)),
          global_pooling(r(Pool2d::global_pooling)),
          ceil_mode(r(Pool2d::ceil_mode)),
          exclusive(r(Pool2d::exclusive)),
          adaptive(r(Pool2d::adaptive)) {
      const std::string layout = r(Pool2d::data_format);
      if (!detail::is_nchw(layout)) throw Error(fmt::format("{}: data_format '{}' is not supported (only NCHW)", r.op().type(), layout), r.op().origin());
    }
  };
  static PoolingType decode_pooling_type(const AttrReader& r) {
    const std::string t = r(Pool2d::pooling_type);
    if (t == "max") return PoolingType::max;
    if (t == "avg") return PoolingType::avg;
    throw Error(fmt::format("{}: {} '{}' must be 'max' or 'avg'", r.op().type(), Pool2d::pooling_type.name, t), r.op().origin());
  }

  static OpDef def() {
    return OpDef(type, "max or average pooling of NCHW images")
        .in(x).out(out)
        .attr(pooling_type, std::string("max")).check<std::string>([](const std::string& t) { return t == "max" || t == "avg"; }, "must be 'max' or 'avg'")
        .required_attr(ksize).check<std::vector<int32_t>>(detail::pair_at_least(1), "must be two values >= 1")
        .attr(global_pooling, false)
        .attr(strides, std::vector<int32_t>{1, 1}).check<std::vector<int32_t>>(detail::pair_at_least(1), "must be two values >= 1")
        .attr(paddings, std::vector<int32_t>{0, 0}).check<std::vector<int32_t>>(detail::pair_at_least(0), "must be two values >= 0")
        .attr(ceil_mode, false)
        .attr(exclusive, true, "avg: divide by the number of in-image elements of the window")
        .attr(adaptive, false, "not supported")
        .attr(use_cudnn, true, "ignored on the CPU")
        .attr(data_format, std::string("NCHW"), "only NCHW (or Fluid's AnyLayout)");
  }
  /// Output extent along one axis (-1 when unknown).
  static int64_t out_size(int64_t in, int64_t k, int64_t p, int64_t s, bool ceil_on) {
    if (in < 0) return -1;
    return ceil_on ? (in - k + 2 * p + s - 1) / s + 1 : (in - k + 2 * p) / s + 1;
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    auto k = c.attr(ksize);
    auto s = c.attr(strides);
    auto p = c.attr(paddings);
    bool global = c.attr(global_pooling), ceil_on = c.attr(ceil_mode);
    std::string layout = c.attr(data_format);
    c.check(detail::is_nchw(layout), "data_format '{}' is not supported (only NCHW)", layout);
    c.check(!c.attr(adaptive), "adaptive pooling is not supported");
    c.check(xs.rank() == 4, "X must be [N, C, H, W], got {}", xs.str());
    c.check(is_float(c.dtype(x)), "X must be a float tensor, got {}", name(c.dtype(x)));
    Shape os{xs[0], xs[1], -1, -1};
    for (int i = 0; i < 2; ++i) {
      if (global) {
        os[2 + i] = xs[2 + i] < 0 ? -1 : 1;
        continue;
      }
      if (xs[2 + i] < 0) continue;
      int64_t o = out_size(xs[2 + i], k[size_t(i)], p[size_t(i)], s[size_t(i)], ceil_on);
      c.check(o > 0, "output size {} <= 0: X {} with ksize {}, strides {}, paddings {}", o, xs.str(), detail::ints_str(k), detail::ints_str(s),
              detail::ints_str(p));
      os[2 + i] = o;
    }
    c.set_output(out, os, c.dtype(x));
  }
  /// pool2d_grad(X, Out, Out@GRAD) -> X@GRAD: max sends each gradient to the window's first maximum, avg spreads it.
  static std::vector<Operator> grad(const GradContext& g) { return {g.default_grad(true)}; }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/pool2d.hpp
  static void eval_cuda(KernelContext&, const Attrs&);      // kernels/cuda/conv.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/pool2d.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/conv.hpp
};

}  // namespace oar::ops
