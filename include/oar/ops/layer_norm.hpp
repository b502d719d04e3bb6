// oar/ops/layer_norm.hpp: layer normalization over the dims from begin_norm_axis on, with an optional
// element-wise Scale and Bias. Kernels in kernels/cpu/layer_norm.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// x seen as [M, K] (M = dims before begin_norm_axis, K = the rest); per row: mean, var (biased),
/// y = (x - mean) / sqrt(var + eps) * scale + bias.
/// x: [d0, ..., dr-1], scale, bias: [K] (dispensable) -> y: x's shape, mean, variance: [M].
struct LayerNorm {
  static OpDef def() {
    return OpDef("layer_norm", "normalize each row of X flattened at begin_norm_axis")
        .in("X").in("Scale", dispensable).in("Bias", dispensable)
        .out("Y").out("Mean", intermediate).out("Variance", intermediate)
        .attr("epsilon", 1e-5f, "added to the variance").check<float>([](float e) { return e >= 0; }, "must be >= 0")
        .attr("begin_norm_axis", 1, "first dim normalized over").check<int32_t>([](int v) { return v >= 1; }, "must be >= 1");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& x = c.shape("X");
    int b = c.attr<int32_t>("begin_norm_axis");
    c.check(is_float(c.dtype("X")), "X must be a floating-point tensor, got {}", name(c.dtype("X")));
    c.check(b < x.rank(), "begin_norm_axis = {} needs X of rank > {}, X is {}", b, b, x.str());
    int64_t m = x.numel(0, b), k = x.numel(b, x.rank());
    for (const char* s : {"Scale", "Bias"}) {
      if (!c.has_input(s)) continue;
      const Shape& p = c.shape(s);
      c.check(p.rank() == 1 && dims_compatible(p[0], k), "{} must be [{}] (X {} from dim {} on), got {}", s, k < 0 ? std::string("?") : std::to_string(k), x.str(), b, p.str());
      c.check(c.dtype(s) == c.dtype("X"), "{} must have X's dtype {}, got {}", s, name(c.dtype("X")), name(c.dtype(s)));
    }
    c.set_output("Y", x, c.dtype("X"));
    c.share_lod("X", "Y");
    c.set_output("Mean", Shape{m}, c.dtype("X"));
    c.set_output("Variance", Shape{m}, c.dtype("X"));
  }
  /// layer_norm_grad(X, Scale?, Mean, Variance, Y@GRAD) -> X@GRAD, Scale@GRAD, Bias@GRAD
  /// g = dy * scale; dx = istd * (g - mean(g) - xhat * mean(g * xhat)); dscale = sum_rows(dy * xhat), dbias = sum_rows(dy).
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op("layer_norm_grad");
    op.set_input("X", g.input("X")).set_input("Mean", g.output("Mean")).set_input("Variance", g.output("Variance"));
    op.set_input("Y@GRAD", g.output_grad("Y"));
    op.set_output("X@GRAD", g.input_grad("X"));
    if (!g.input("Scale").empty()) op.set_input("Scale", g.input("Scale")).set_output("Scale@GRAD", g.input_grad("Scale"));
    if (!g.input("Bias").empty()) op.set_output("Bias@GRAD", g.input_grad("Bias"));
    for (auto& [k, v] : g.fwd().attrs()) op.set_attr(k, v);
    op.set_origin(g.fwd().origin());
    return {op};
  }
  static void eval_cpu(KernelContext&);       // kernels/cpu/layer_norm.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/layer_norm.hpp
};

}  // namespace oar::ops
