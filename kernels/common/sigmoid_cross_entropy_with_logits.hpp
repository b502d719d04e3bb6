// kernels/common/sigmoid_cross_entropy_with_logits.hpp: the checked inputs and outputs the logistic loss's kernels
// on every place start from.
#pragma once
#include "oar/ops/sigmoid_cross_entropy_with_logits.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// What sigmoid_cross_entropy_with_logits' kernels on every place start from: X, Label checked to be X's shape,
/// and Out resized to it (unless it is X: in place allowed) once X's dtype is known to be f32 or f64.
struct SigmoidCrossEntropyPlan {
  const LoDTensor &x, &label;
  LoDTensor& out;
};
inline SigmoidCrossEntropyPlan sigmoid_cross_entropy_plan(const KernelContext& c) {
  using S = ops::SigmoidCrossEntropyWithLogits;
  const LoDTensor& xt = c.in(S::x);
  const LoDTensor& lt = c.in(S::label);
  LoDTensor& ot = c.out(S::out);
  c.check(lt.shape() == xt.shape(), "Label {} must have X's shape {}", lt.shape(), xt.shape());
  c.dispatch_float([](auto) {});  // the dtypes both places take
  if (&ot != &xt) ot.resize(xt.shape(), xt.dtype());
  return {xt, lt, ot};
}

/// The gradient's inputs, Out@GRAD checked to be X's shape, and X@GRAD (not resized).
struct SigmoidCrossEntropyGradPlan {
  const LoDTensor &x, &label, &out_grad;
  LoDTensor& x_grad;
};
inline SigmoidCrossEntropyGradPlan sigmoid_cross_entropy_grad_plan(const KernelContext& c) {
  using S = ops::SigmoidCrossEntropyWithLogits;
  const LoDTensor& xt = c.in(S::x);
  const LoDTensor& lt = c.in(S::label);
  const LoDTensor& dout = c.in(S::out_grad);
  LoDTensor& dx = c.out(S::x_grad);
  c.check(dout.shape() == xt.shape(), "Out@GRAD {} does not match X {}", dout.shape(), xt.shape());
  return {xt, lt, dout, dx};
}

}  // namespace oar::kernels
