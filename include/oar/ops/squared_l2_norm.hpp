// oar/ops/squared_l2_norm.hpp: squared_l2_norm, the sum of the squares of every element of X as a [1] tensor.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = sum(x^2)
/// x: any shape -> [1].
struct SquaredL2Norm {
  static constexpr std::string_view type = "squared_l2_norm";
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Slot x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static OpDef def() { return OpDef(type, "sum of squares of all elements of X, shape [1]").in(x).out(out); }
  static void infer_shape(InferShapeContext& c) {
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    c.set_output(out, Shape{1}, c.dtype(x));
  }
  /// squared_l2_norm_grad(X, Out@GRAD) -> X@GRAD = 2 * x * Out@GRAD[0]
  static std::vector<Operator> grad(const GradContext& g) { return {g.default_grad(false)}; }
  static void eval_cpu(KernelContext&, const NoAttrs&);       // kernels/cpu/squared_l2_norm.hpp
  static void eval_grad_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/squared_l2_norm.hpp
  static void eval_cuda(KernelContext&, const NoAttrs&);       // kernels/cuda/clip_norm.hpp
  static void eval_grad_cuda(KernelContext&, const NoAttrs&);  // kernels/cuda/clip_norm.hpp
};

}  // namespace oar::ops
