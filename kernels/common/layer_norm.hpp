// kernels/common/layer_norm.hpp: the checks and output sizing that layer_norm's kernels on every place start from.
#pragma once
#include "oar/ops/layer_norm.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// What layer_norm's kernels on every place start from: X seen as [rows, k] at begin_norm_axis, and Scale and
/// Bias (null when absent) checked to hold k values.
struct LayerNormPlan {
  int64_t rows = 0, k = 0;
  const LoDTensor* scale = nullptr;
  const LoDTensor* bias = nullptr;
};
inline LayerNormPlan layer_norm_plan(const KernelContext& c, const ops::LayerNorm::Attrs& a) {
  using L = ops::LayerNorm;
  const LoDTensor& xt = c.in(L::x);
  const int b = a.begin_norm_axis;
  c.check(b < xt.rank(), "begin_norm_axis = {} needs X of rank > {}, X is {}", b, b, xt.shape());
  LayerNormPlan p;
  p.rows = xt.shape().numel(0, b), p.k = xt.shape().numel(b, xt.rank());
  p.scale = c.in_if(L::scale);
  p.bias = c.in_if(L::bias);
  for (const LoDTensor* t : {p.scale, p.bias})
    if (t) c.check(t->numel() == p.k, "Scale and Bias must have {} elements (X {} from dim {} on), got {}", p.k, xt.shape(), b, t->shape());
  return p;
}

/// Y (resized unless it is X), Mean and Variance ([rows]) of a forward run planned by `p`.
/// requires: X's dtype has a kernel on this place (the caller checks it first, in its own words).
struct LayerNormOut {
  LoDTensor &y, &mean, &variance;
};
inline LayerNormOut layer_norm_out(const KernelContext& c, const LayerNormPlan& p) {
  using L = ops::LayerNorm;
  const LoDTensor& xt = c.in(L::x);
  LayerNormOut o{c.out(L::y), c.out(L::mean), c.out(L::variance)};
  if (&o.y != &xt) o.y.resize(xt.shape(), xt.dtype());
  o.mean.resize(Shape{p.rows}, xt.dtype());
  o.variance.resize(Shape{p.rows}, xt.dtype());
  return o;
}

/// The same for the gradient: X as [rows, k], with Y@GRAD shaped like X, Mean and Variance holding `rows` values
/// and Scale (null when absent; Bias is not read, so null) `k`.
inline LayerNormPlan layer_norm_grad_plan(const KernelContext& c, const ops::LayerNorm::Attrs& a) {
  using L = ops::LayerNorm;
  const LoDTensor& xt = c.in(L::x);
  const LoDTensor& dy = c.in(L::y_grad);
  const LoDTensor& mean_t = c.in(L::mean);
  const LoDTensor& var_t = c.in(L::variance);
  const int b = a.begin_norm_axis;
  c.check(b < xt.rank(), "begin_norm_axis = {} needs X of rank > {}, X is {}", b, b, xt.shape());
  c.check(dy.shape() == xt.shape(), "Y@GRAD {} does not match X {}", dy.shape(), xt.shape());
  LayerNormPlan p;
  p.rows = xt.shape().numel(0, b), p.k = xt.shape().numel(b, xt.rank());
  p.scale = c.in_if(L::scale);
  c.check(mean_t.numel() == p.rows && var_t.numel() == p.rows, "Mean {} and Variance {} must have {} elements (X {} up to dim {})", mean_t.shape(),
          var_t.shape(), p.rows, xt.shape(), b);
  if (p.scale) c.check(p.scale->numel() == p.k, "Scale must have {} elements (X {} from dim {} on), got {}", p.k, xt.shape(), b, p.scale->shape());
  return p;
}

}  // namespace oar::kernels
