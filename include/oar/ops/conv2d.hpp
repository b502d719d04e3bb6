// oar/ops/conv2d.hpp: conv2d, the 2-D convolution (cross-correlation) over NCHW images with strides, zero
// padding, dilation and channel groups, as Fluid's conv2d. Also the window arithmetic conv2d_transpose and
// pool2d share (detail::conv_out_size, detail::pair_at_least) and the decoded window (detail::ConvAttrs).
#pragma once
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "oar/ops/op.hpp"

namespace oar::ops {

namespace detail {

/// Output extent of a window sweep: (in + 2p - (d(k-1)+1)) / s + 1; -1 when `in` is unknown.
inline int64_t conv_out_size(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d) {
  if (in < 0) return -1;
  return (in + 2 * p - (d * (k - 1) + 1)) / s + 1;
}

/// An attribute check: exactly two entries, each >= `lo`.
inline auto pair_at_least(int lo) {
  return [lo](const std::vector<int32_t>& v) { return v.size() == 2 && v[0] >= lo && v[1] >= lo; };
}

/// "[a, b]" for an ints attribute (error texts).
inline std::string ints_str(const std::vector<int32_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

/// Fluid writes "AnyLayout" as the default layout of programs it saved; both mean NCHW here.
inline bool is_nchw(std::string_view f) { return f == "NCHW" || f == "AnyLayout"; }

/// The window of a conv-like op as its kernels read it (conv2d, conv2d_fusion, conv2d_transpose).
struct ConvAttrs {
  std::array<int32_t, 2> strides, paddings, dilations;
  int32_t groups;
};

/// Decodes `Op`'s strides, paddings, dilations and groups, and refuses a data_format other than NCHW.
template <class Op>
ConvAttrs read_conv_attrs(const AttrReader& r) {
  const std::string layout = r(Op::data_format);
  if (!is_nchw(layout)) throw Error(fmt::format("{}: data_format '{}' is not supported (only NCHW)", r.op().type(), layout), r.op().origin());
  return {r.array<2>(Op::strides), r.array<2>(Op::paddings), r.array<2>(Op::dilations), r(Op::groups)};
}

/// The window attributes conv2d and conv2d_transpose declare alike (strides, paddings, dilations, groups), with
/// their defaults and checks, added to `d`.
template <class Op>
OpDef& conv_window_attrs(OpDef& d) {
  return d.attr(Op::strides, std::vector<int32_t>{1, 1}).template check<std::vector<int32_t>>(pair_at_least(1), "must be two values >= 1")
      .attr(Op::paddings, std::vector<int32_t>{0, 0}).template check<std::vector<int32_t>>(pair_at_least(0), "must be two values >= 0")
      .attr(Op::dilations, std::vector<int32_t>{1, 1}).template check<std::vector<int32_t>>(pair_at_least(1), "must be two values >= 1")
      .attr(Op::groups, 1).template check<int32_t>([](int g) { return g >= 1; }, "must be >= 1");
}

/// What conv2d and conv2d_transpose check first when inferring shapes: the NCHW layout, Input and Filter of
/// rank 4 (`filter_dims` names Filter's dims in the message) and of one float type.
template <class Op>
void check_conv_operands(InferShapeContext& c, std::string_view filter_dims) {
  const std::string layout = c.attr(Op::data_format);
  c.check(is_nchw(layout), "data_format '{}' is not supported (only NCHW)", layout);
  c.check(c.shape(Op::input).rank() == 4, "Input must be [N, C, H, W], got {}", c.shape(Op::input).str());
  c.check(c.shape(Op::filter).rank() == 4, "Filter must be {}, got {}", filter_dims, c.shape(Op::filter).str());
  c.check(is_float(c.dtype(Op::input)) && c.dtype(Op::input) == c.dtype(Op::filter), "Input ({}) and Filter ({}) must be the same float type",
          name(c.dtype(Op::input)), name(c.dtype(Op::filter)));
}

}  // namespace detail

/// Output[n, m, i, j] = sum_{c in group(m), a, b} Input[n, c, i*s0 - p0 + a*d0, j*s1 - p1 + b*d1] * Filter[m, c', a, b]
/// (zero outside the image; c' = c - group(m) * C/groups).
/// Input: [N, C, H, W], Filter: [M, C/groups, kh, kw] -> Output: [N, M, H', W'],
/// H' = (H + 2p0 - (d0(kh-1)+1)) / s0 + 1, W' likewise. M must be a multiple of groups.
struct Conv2d {
  static constexpr std::string_view type = "conv2d";
  static constexpr Slot input{"Input"}, filter{"Filter"}, output{"Output"};
  static constexpr Slot input_grad{"Input@GRAD"}, filter_grad{"Filter@GRAD"}, output_grad{"Output@GRAD"};
  static constexpr Attr<std::vector<int32_t>> strides{"strides"}, paddings{"paddings"}, dilations{"dilations"};
  static constexpr Attr<int32_t> groups{"groups"};
  static constexpr Attr<bool> use_cudnn{"use_cudnn"};
  static constexpr Attr<std::string> data_format{"data_format"};

  /// What the kernels read, decoded once when a program is prepared (data_format is checked here).
  struct Attrs : detail::ConvAttrs {
    explicit Attrs(const AttrReader& r) : detail::ConvAttrs(detail::read_conv_attrs<Conv2d>(r)) {}
  };

  static OpDef def() {
    OpDef d(type, "2-D convolution of NCHW images");
    return detail::conv_window_attrs<Conv2d>(d.in(input).in(filter).out(output))
        .attr(use_cudnn, true, "ignored on the CPU")
        .attr(data_format, std::string("NCHW"), "only NCHW (or Fluid's AnyLayout)");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& x = c.shape(input);
    const Shape& f = c.shape(filter);
    auto s = c.attr(strides);
    auto p = c.attr(paddings);
    auto d = c.attr(dilations);
    int g = c.attr(groups);
    detail::check_conv_operands<Conv2d>(c, "[M, C/groups, kh, kw]");
    c.check(dims_compatible(x[1], f[1] < 0 ? -1 : f[1] * g), "Input {} has {} channels but Filter {} with groups = {} expects {}", x.str(), x[1], f.str(),
            g, f[1] * g);
    c.check(f[0] < 0 || f[0] % g == 0, "Filter {} has {} output channels, not a multiple of groups = {}", f.str(), f[0], g);
    Shape out{x[0], f[0], -1, -1};
    for (int i = 0; i < 2; ++i) {
      if (x[2 + i] < 0 || f[2 + i] < 0) continue;
      int64_t o = detail::conv_out_size(x[2 + i], f[2 + i], p[size_t(i)], s[size_t(i)], d[size_t(i)]);
      c.check(o > 0, "output size {} <= 0: Input {} with Filter {}, strides {}, paddings {}, dilations {}", o, x.str(), f.str(), detail::ints_str(s),
              detail::ints_str(p), detail::ints_str(d));
      out[2 + i] = o;
    }
    c.set_output(output, out, c.dtype(input));
  }
  /// conv2d_grad(Input, Filter, Output@GRAD) -> Input@GRAD (col2im of Filter^T * dOutput), Filter@GRAD (dOutput * im2col(Input)^T)
  static std::vector<Operator> grad(const GradContext& g) { return {g.default_grad(false)}; }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/conv2d.hpp
  static void eval_cuda(KernelContext&, const Attrs&);      // kernels/cuda/conv.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/conv2d.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/conv.hpp
};

}  // namespace oar::ops
