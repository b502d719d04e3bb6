// kernels/common/batch_norm.hpp: X as [N, C, S] and the checked inputs of batch_norm and its gradient, with
// which running statistics a run writes: where the kernels of every place start.
#pragma once
#include <cstdint>

#include "oar/ops/batch_norm.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// [N, C, S] view of an NCHW tensor (S = H*W..., 1 for [N, C]).
struct NcsDims {
  int64_t n, c, s;
};
inline NcsDims ncs(const Shape& x) { return {x[0], x[1], x.numel(2, x.rank())}; }

/// batch_norm's inputs, X checked against Scale, Bias, Mean and Variance, and which running statistics a run
/// writes: under is_test not MeanOut / VarianceOut that are Mean / Variance themselves (a test program, run by
/// many evaluator threads at once, must not write the shared running statistics). Both devices' kernels start here.
struct BnPlan {
  const LoDTensor &x, &scale, &bias, &mean, &variance;
  NcsDims dm;
  bool write_mean, write_var;
};
inline BnPlan bn_plan(const KernelContext& c, const ops::BatchNorm::Attrs& a) {
  using B = ops::BatchNorm;
  const LoDTensor& xt = c.in(B::x);
  const LoDTensor& scale = c.in(B::scale);
  const LoDTensor& bias = c.in(B::bias);
  const LoDTensor& mean = c.in(B::mean);
  const LoDTensor& variance = c.in(B::variance);
  c.check(xt.rank() >= 2 && xt.rank() <= 5, "X must have rank 2 to 5 ([N, C] or [N, C, H, W]), got {}", xt.shape());
  const NcsDims dm = ncs(xt.shape());
  for (const LoDTensor* p : {&scale, &bias, &mean, &variance}) {
    c.check(p->rank() == 1 && p->dim(0) == dm.c, "Scale, Bias, Mean and Variance must be [{}] for X {}, got {}", dm.c, xt.shape(), p->shape());
    c.check(p->dtype() == xt.dtype(), "Scale, Bias, Mean and Variance must be {} as X is, got {}", name(xt.dtype()), name(p->dtype()));
  }
  const bool write_mean = c.has_out(B::mean_out) && !(a.is_test && c.out_value(B::mean_out) == c.in_value(B::mean));
  const bool write_var = c.has_out(B::variance_out) && !(a.is_test && c.out_value(B::variance_out) == c.in_value(B::variance));
  return {xt, scale, bias, mean, variance, dm, write_mean, write_var};
}

/// batch_norm_grad's inputs, Y@GRAD checked against X.
struct BnGradPlan {
  const LoDTensor &x, &scale, &saved_mean, &saved_variance, &y_grad;  ///< saved_variance holds 1 / std
};
inline BnGradPlan bn_grad_plan(const KernelContext& c) {
  using B = ops::BatchNorm;
  const LoDTensor& xt = c.in(B::x);
  const LoDTensor& scale = c.in(B::scale);
  const LoDTensor& smean = c.in(B::saved_mean);
  const LoDTensor& sistd = c.in(B::saved_variance);
  const LoDTensor& dy = c.in(B::y_grad);
  c.check(dy.shape() == xt.shape(), "Y@GRAD {} does not match X {}", dy.shape(), xt.shape());
  return {xt, scale, smean, sistd, dy};
}

}  // namespace oar::kernels
