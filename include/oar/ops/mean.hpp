// oar/ops/mean.hpp: mean, the average of every element of X as a [1] tensor (the usual loss reduction).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = sum(x) / numel(x)
/// x: any shape -> [1]. An empty X gives NaN.
struct Mean {
  static constexpr std::string_view type = "mean";
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Slot x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static OpDef def() { return OpDef(type, "mean of all elements of X, shape [1]").in(x).out(out); }
  static void infer_shape(InferShapeContext& c) {
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    c.set_output(out, Shape{1}, c.dtype(x));
  }
  /// mean_grad(X, Out@GRAD) -> X@GRAD = Out@GRAD[0] / numel(X) everywhere
  static std::vector<Operator> grad(const GradContext& g) { return {g.default_grad(false)}; }
  static void eval_cpu(KernelContext&, const NoAttrs&);       // kernels/cpu/mean.hpp
  static void eval_cuda(KernelContext&, const NoAttrs&);      // kernels/cuda/elementwise.hpp
  static void eval_grad_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/mean.hpp
  static void eval_grad_cuda(KernelContext&, const NoAttrs&);  // kernels/cuda/elementwise.hpp
};

}  // namespace oar::ops
