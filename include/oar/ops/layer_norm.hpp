// oar/ops/layer_norm.hpp: layer normalization over the dims from begin_norm_axis on, with an optional
// element-wise Scale and Bias. Kernels in kernels/cpu/layer_norm.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// x seen as [M, K] (M = dims before begin_norm_axis, K = the rest); per row: mean, var (biased),
/// y = (x - mean) / sqrt(var + eps) * scale + bias.
/// x: [d0, ..., dr-1], scale, bias: [K] (dispensable) -> y: x's shape, mean, variance: [M].
struct LayerNorm {
  static constexpr std::string_view type = "layer_norm";
  static constexpr Slot x{"X"}, scale{"Scale"}, bias{"Bias"}, y{"Y"}, mean{"Mean"}, variance{"Variance"};
  static constexpr Slot x_grad{"X@GRAD"}, scale_grad{"Scale@GRAD"}, bias_grad{"Bias@GRAD"}, y_grad{"Y@GRAD"};
  static constexpr Attr<float> epsilon{"epsilon"};
  static constexpr Attr<int32_t> begin_norm_axis{"begin_norm_axis"};

  /// What the kernels read, decoded once when a program is prepared.
  struct Attrs {
    float epsilon;
    int32_t begin_norm_axis;
    explicit Attrs(const AttrReader& r) : epsilon(r(LayerNorm::epsilon)), begin_norm_axis(r(LayerNorm::begin_norm_axis)) {}
  };

  static OpDef def() {
    return OpDef(type, "normalize each row of X flattened at begin_norm_axis")
        .in(x).in(scale, dispensable).in(bias, dispensable)
        .out(y).out(mean, intermediate).out(variance, intermediate)
        .attr(epsilon, 1e-5f, "added to the variance").check<float>([](float e) { return e >= 0; }, "must be >= 0")
        .attr(begin_norm_axis, 1, "first dim normalized over").check<int32_t>([](int v) { return v >= 1; }, "must be >= 1");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    int b = c.attr(begin_norm_axis);
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    c.check(b < xs.rank(), "begin_norm_axis = {} needs X of rank > {}, X is {}", b, b, xs.str());
    int64_t m = xs.numel(0, b), k = xs.numel(b, xs.rank());
    for (Slot s : {scale, bias}) {
      if (!c.has_input(s)) continue;
      const Shape& p = c.shape(s);
      c.check(p.rank() == 1 && dims_compatible(p[0], k), "{} must be [{}] (X {} from dim {} on), got {}", s.name, k < 0 ? std::string("?") : std::to_string(k), xs.str(), b, p.str());
      c.check(c.dtype(s) == c.dtype(x), "{} must have X's dtype {}, got {}", s.name, name(c.dtype(x)), name(c.dtype(s)));
    }
    c.set_output(y, xs, c.dtype(x));
    c.share_lod(x, y);
    c.set_output(mean, Shape{m}, c.dtype(x));
    c.set_output(variance, Shape{m}, c.dtype(x));
  }
  /// layer_norm_grad(X, Scale?, Mean, Variance, Y@GRAD) -> X@GRAD, Scale@GRAD, Bias@GRAD
  /// g = dy * scale; dx = istd * (g - mean(g) - xhat * mean(g * xhat)); dscale = sum_rows(dy * xhat), dbias = sum_rows(dy).
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op = g.grad_op();
    op.set_input(x, g.input(x)).set_input(mean, g.output(mean)).set_input(variance, g.output(variance));
    op.set_input(y_grad, g.output_grad(y));
    op.set_output(x_grad, g.input_grad(x));
    if (!g.input(scale).empty()) op.set_input(scale, g.input(scale)).set_output(scale_grad, g.input_grad(scale));
    if (!g.input(bias).empty()) op.set_output(bias_grad, g.input_grad(bias));
    return {op};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/layer_norm.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/layer_norm.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/layer_norm.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/layer_norm.hpp
};

}  // namespace oar::ops
