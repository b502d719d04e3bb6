// kernels/cuda/layer_norm.hpp: eval_cuda of layer_norm and its gradient (kernels/cuda/layer_norm.cu), from the plans
// both places share (kernels/common/layer_norm.hpp) and the dtype checks the device needs on top.
#pragma once
#include "kernels/common/layer_norm.hpp"  // kernels::layer_norm_plan, layer_norm_out, layer_norm_grad_plan
#include "kernels/cuda/host.hpp"
#include "kernels/cuda/layer_norm_launch.hpp"
#include "oar/ops/layer_norm.hpp"

namespace oar::ops {

/// requires: X [rows, k] when flattened at begin_norm_axis; Scale, Bias (optional) [k]. Y may be X.
inline void LayerNorm::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const kernels::LayerNormPlan p = kernels::layer_norm_plan(c, a);
  // The device reads them as X's type: another dtype would be read at the wrong width.
  for (const LoDTensor* v : {p.scale, p.bias})
    if (v) c.check(v->dtype() == xt.dtype(), "Scale and Bias must be {} as X is, got {}", name(xt.dtype()), name(v->dtype()));
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype());
  const kernels::LayerNormOut o = kernels::layer_norm_out(c, p);
  cuda_kernels::check(c, cuda_kernels::layer_norm_forward(t, xt.raw(), p.scale ? p.scale->raw() : nullptr, p.bias ? p.bias->raw() : nullptr, o.y.raw(),
                                                          o.mean.raw(), o.variance.raw(), p.rows, p.k, a.epsilon, cuda_kernels::stream(c)));
  if (&o.y != &xt) o.y.set_lod(xt.lod());
}

inline void LayerNorm::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const LoDTensor& mean_t = c.in(mean);
  const LoDTensor& var_t = c.in(variance);
  const LoDTensor& dy = c.in(y_grad);
  const kernels::LayerNormPlan p = kernels::layer_norm_grad_plan(c, a);
  const int64_t rows = p.rows, k = p.k;
  const LoDTensor* scale_t = p.scale;
  // The device reads these as X's type: another dtype would be read at the wrong width.
  for (const LoDTensor* v : {&dy, &mean_t, &var_t, scale_t})
    if (v) c.check(v->dtype() == xt.dtype(), "Y@GRAD, Mean, Variance and Scale must be {} as X is, got {}", name(xt.dtype()), name(v->dtype()));
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype());
  void* dx = cuda_kernels::optional_out(c, x_grad, xt.shape(), xt.dtype());
  void* ds = cuda_kernels::optional_out(c, scale_grad, Shape{k}, xt.dtype());
  void* db = cuda_kernels::optional_out(c, bias_grad, Shape{k}, xt.dtype());
  if (!dx && !ds && !db) return;
  Tensor ws = cuda_kernels::workspace(c, cuda_kernels::layer_norm_scratch_bytes(rows, k));
  cuda_kernels::check(c, cuda_kernels::layer_norm_backward(t, xt.raw(), dy.raw(), scale_t ? scale_t->raw() : nullptr, mean_t.raw(), var_t.raw(), dx, ds,
                                                           db, rows, k, a.epsilon, ws.raw(), cuda_kernels::stream(c)));
  if (dx) c.out(x_grad).set_lod(xt.lod());
}

}  // namespace oar::ops
