// oar/ops/conv2d_transpose.hpp: conv2d_transpose, the adjoint of conv2d with respect to its input (a.k.a.
// "deconvolution"): every input pixel scatters Filter-weighted copies into a strided, padded output.
#pragma once
#include "oar/ops/conv2d.hpp"

namespace oar::ops {

/// Output = the conv2d input gradient for dOutput = Input, with the same Filter:
/// Output[n, m, i*s0 - p0 + a*d0, j*s1 - p1 + b*d1] += Input[n, c, i, j] * Filter[c, m', a, b] (m in group(c)).
/// Input: [N, C, H, W], Filter: [C, M/groups, kh, kw] -> Output: [N, M, H', W'],
/// H' = (H-1)s0 - 2p0 + d0(kh-1) + 1, or output_size[0] when given (it must lie in [H', H' + s0)).
struct Conv2dTranspose {
  static constexpr std::string_view type = "conv2d_transpose";
  static constexpr Slot input{"Input"}, filter{"Filter"}, output{"Output"};
  static constexpr Slot input_grad{"Input@GRAD"}, filter_grad{"Filter@GRAD"}, output_grad{"Output@GRAD"};
  static constexpr Attr<std::vector<int32_t>> strides{"strides"}, paddings{"paddings"}, dilations{"dilations"}, output_size{"output_size"};
  static constexpr Attr<int32_t> groups{"groups"};
  static constexpr Attr<bool> use_cudnn{"use_cudnn"};
  static constexpr Attr<std::string> data_format{"data_format"};

  /// What the kernels read, decoded once when a program is prepared (data_format is checked here).
  struct Attrs : detail::ConvAttrs {
    std::array<int32_t, 2> output_size{0, 0};  ///< 0: not given (the smallest size)
    explicit Attrs(const AttrReader& r) : detail::ConvAttrs(detail::read_conv_attrs<Conv2dTranspose>(r)) {
      const std::vector<int32_t> os = r(Conv2dTranspose::output_size);
      if (os.empty()) return;
      if (os.size() != 2)
        throw Error(fmt::format("{}: attribute '{}' must be empty or have 2 entries, got {}", r.op().type(), Conv2dTranspose::output_size.name, os.size()),
                    r.op().origin());
      output_size = {os[0], os[1]};
    }
  };

  static OpDef def() {
    OpDef d(type, "transposed 2-D convolution of NCHW images");
    return detail::conv_window_attrs<Conv2dTranspose>(d.in(input).in(filter).out(output))
        .attr(output_size, std::vector<int32_t>{}, "[H', W'] to pick among the sizes a stride allows; empty: the smallest")
        .check<std::vector<int32_t>>([](const std::vector<int32_t>& v) { return v.empty() || (v.size() == 2 && v[0] > 0 && v[1] > 0); },
                                     "must be empty or two values > 0")
        .attr(use_cudnn, true, "ignored on the CPU")
        .attr(data_format, std::string("NCHW"), "only NCHW (or Fluid's AnyLayout)");
  }
  /// Output extent along one axis (-1 when unknown); `given` is output_size's entry or 0.
  static int64_t out_size(int64_t in, int64_t k, int64_t p, int64_t s, int64_t d, int64_t given) {
    if (in < 0 || k < 0) return -1;
    int64_t o = (in - 1) * s - 2 * p + d * (k - 1) + 1;
    return given > 0 ? given : o;
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& x = c.shape(input);
    const Shape& f = c.shape(filter);
    auto s = c.attr(strides);
    auto p = c.attr(paddings);
    auto d = c.attr(dilations);
    auto os = c.attr(output_size);
    int g = c.attr(groups);
    detail::check_conv_operands<Conv2dTranspose>(c, "[C, M/groups, kh, kw]");
    c.check(dims_compatible(x[1], f[0]), "Input {} has {} channels but Filter {} has {} input channels (dim 0)", x.str(), x[1], f.str(), f[0]);
    c.check(f[0] < 0 || f[0] % g == 0, "Filter {} has {} input channels, not a multiple of groups = {}", f.str(), f[0], g);
    Shape out{x[0], f[1] < 0 ? -1 : f[1] * g, -1, -1};
    for (int i = 0; i < 2; ++i) {
      int64_t given = os.empty() ? 0 : os[size_t(i)];
      const bool known = x[2 + i] >= 0 && f[2 + i] >= 0;
      int64_t smallest = known ? out_size(x[2 + i], f[2 + i], p[size_t(i)], s[size_t(i)], d[size_t(i)], 0) : 0;
      if (!known && given == 0) continue;
      c.check(!known || smallest > 0, "output size {} <= 0: Input {} with Filter {}, strides {}, paddings {}, dilations {}", smallest, x.str(),
              f.str(), detail::ints_str(s), detail::ints_str(p), detail::ints_str(d));
      if (given > 0 && known)
        c.check(given >= smallest && given < smallest + s[size_t(i)], "output_size {} must lie in [{}, {}) along axis {} (Input {}, Filter {}, strides {})",
                detail::ints_str(os), smallest, smallest + s[size_t(i)], i, x.str(), f.str(), detail::ints_str(s));
      out[2 + i] = given > 0 ? given : smallest;
    }
    c.set_output(output, out, c.dtype(input));
  }
  /// conv2d_transpose_grad(Input, Filter, Output@GRAD) -> Input@GRAD (conv2d of dOutput), Filter@GRAD
  static std::vector<Operator> grad(const GradContext& g) { return {g.default_grad(false)}; }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/conv2d_transpose.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/conv2d_transpose.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/conv.hpp (cuDNN)
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/conv.hpp
};

}  // namespace oar::ops
