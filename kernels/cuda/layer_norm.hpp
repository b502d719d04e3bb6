// kernels/cuda/layer_norm.hpp: eval_cuda of layer_norm and its gradient (kernels/cuda/norm.cu), with the CPU
// kernel's checks (kernels/cpu/layer_norm.hpp).
#pragma once
#include "kernels/cuda/host.hpp"
#include "oar/ops/layer_norm.hpp"

namespace oar::ops {

/// requires: X [rows, k] when flattened at begin_norm_axis; Scale, Bias (optional) [k]. Y may be X.
inline void LayerNorm::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const int b = a.begin_norm_axis;
  c.check(b < xt.rank(), "begin_norm_axis = {} needs X of rank > {}, X is {}", b, b, xt.shape());
  const int64_t rows = xt.shape().numel(0, b), k = xt.shape().numel(b, xt.rank());
  const LoDTensor* scale_t = c.has_in(scale) ? &c.in(scale) : nullptr;
  const LoDTensor* bias_t = c.has_in(bias) ? &c.in(bias) : nullptr;
  for (auto* p : {scale_t, bias_t})
    if (p) {
      c.check(p->numel() == k, "Scale and Bias must have {} elements (X {} from dim {} on), got {}", k, xt.shape(), b, p->shape());
      c.check(p->dtype() == xt.dtype(), "Scale and Bias must be {} as X is, got {}", name(xt.dtype()), name(p->dtype()));
    }
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype());
  LoDTensor& yt = c.out(y);
  LoDTensor& mean_t = c.out(mean);
  LoDTensor& var_t = c.out(variance);
  if (&yt != &xt) yt.resize(xt.shape(), xt.dtype());
  mean_t.resize(Shape{rows}, xt.dtype());
  var_t.resize(Shape{rows}, xt.dtype());
  cuda_kernels::check(c, cuda_kernels::layer_norm_forward(t, xt.raw(), scale_t ? scale_t->raw() : nullptr, bias_t ? bias_t->raw() : nullptr, yt.raw(),
                                                          mean_t.raw(), var_t.raw(), rows, k, a.epsilon, cuda_kernels::stream(c)));
  if (&yt != &xt) yt.set_lod(xt.lod());
}

inline void LayerNorm::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const LoDTensor& mean_t = c.in(mean);
  const LoDTensor& var_t = c.in(variance);
  const LoDTensor& dy = c.in(y_grad);
  c.check(dy.shape() == xt.shape(), "Y@GRAD {} does not match X {}", dy.shape(), xt.shape());
  const int b = a.begin_norm_axis;
  c.check(b < xt.rank(), "begin_norm_axis = {} needs X of rank > {}, X is {}", b, b, xt.shape());
  const int64_t rows = xt.shape().numel(0, b), k = xt.shape().numel(b, xt.rank());
  // NOTE: the device reads them unchecked: a short one would read past its end, not fail
  c.check(mean_t.numel() == rows && var_t.numel() == rows, "Mean {} and Variance {} must have {} elements (X {} up to dim {})", mean_t.shape(),
          var_t.shape(), rows, xt.shape(), b);
  const LoDTensor* scale_t = c.has_in(scale) ? &c.in(scale) : nullptr;
  if (scale_t) c.check(scale_t->numel() == k, "Scale must have {} elements (X {} from dim {} on), got {}", k, xt.shape(), b, scale_t->shape());
  // The device reads these as X's type: another dtype would be read at the wrong width.
  for (const LoDTensor* p : {&dy, &mean_t, &var_t, scale_t})
    if (p) c.check(p->dtype() == xt.dtype(), "Y@GRAD, Mean, Variance and Scale must be {} as X is, got {}", name(xt.dtype()), name(p->dtype()));
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype());
  auto grad_out = [&](Slot slot, const Shape& shape) -> void* {
    if (!c.has_out(slot)) return nullptr;
    LoDTensor& o = c.out(slot);
    o.resize(shape, xt.dtype());
    return o.raw();
  };
  void* dx = grad_out(x_grad, xt.shape());
  void* ds = grad_out(scale_grad, Shape{k});
  void* db = grad_out(bias_grad, Shape{k});
  if (!dx && !ds && !db) return;
  Tensor ws = cuda_kernels::workspace(c, cuda_kernels::layer_norm_scratch_bytes(rows, k));
  cuda_kernels::check(c, cuda_kernels::layer_norm_backward(t, xt.raw(), dy.raw(), scale_t ? scale_t->raw() : nullptr, mean_t.raw(), var_t.raw(), dx, ds,
                                                           db, rows, k, a.epsilon, ws.raw(), cuda_kernels::stream(c)));
  if (dx) c.out(x_grad).set_lod(xt.lod());
}

}  // namespace oar::ops
