// kernels/cuda/clip_norm.hpp: eval_cuda of squared_l2_norm (and its gradient), clip_by_norm and sign
// (kernels/cuda/clip_norm.cu), what clipping by norm or global norm and L1 decay append to an update program
// (optim/clip-inl.hpp, optim/regularizer-inl.hpp). Checks as the CPU kernels make them.
#pragma once
#include "kernels/cuda/clip_norm_launch.hpp"
#include "kernels/cuda/host.hpp"
#include "oar/ops/clip_by_norm.hpp"
#include "oar/ops/sign.hpp"
#include "oar/ops/squared_l2_norm.hpp"

namespace oar::ops {

inline void SquaredL2Norm::eval_cuda(KernelContext& c, const NoAttrs&) {
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  c.check(&ot != &xt, "Out must not be X");  // Out is sized before X is read
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype());
  Tensor ws = cuda_kernels::workspace(c, cuda_kernels::squared_l2_norm_scratch_bytes(xt.numel()));
  ot.resize(Shape{1}, xt.dtype());
  cuda_kernels::check(c, cuda_kernels::squared_l2_norm(t, xt.raw(), ot.raw(), xt.numel(), ws.raw(), cuda_kernels::stream(c)));
}

inline void SquaredL2Norm::eval_grad_cuda(KernelContext& c, const NoAttrs&) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  LoDTensor& dx = c.out(x_grad);
  c.check(dout.numel() == 1, "Out@GRAD must hold one value, got {}", dout.shape());
  c.check(dout.dtype() == xt.dtype(), "Out@GRAD is {} but X is {}", name(dout.dtype()), name(xt.dtype()));
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype());
  dx.resize(xt.shape(), xt.dtype());
  cuda_kernels::check(c, cuda_kernels::squared_l2_norm_grad(t, xt.raw(), dout.raw(), dx.raw(), xt.numel(), cuda_kernels::stream(c)));
  dx.set_lod(xt.lod());
}

/// In place allowed (Out == X).
inline void ClipByNorm::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype());
  Tensor ws = cuda_kernels::workspace(c, cuda_kernels::clip_by_norm_scratch_bytes(xt.numel()));
  if (&ot != &xt) ot.resize(xt.shape(), xt.dtype());
  cuda_kernels::check(c, cuda_kernels::clip_by_norm(t, xt.raw(), ot.raw(), xt.numel(), double(a.max_norm), ws.raw(), cuda_kernels::stream(c)));
  if (&ot != &xt) ot.set_lod(xt.lod());
}

/// In place allowed (Out == X).
inline void Sign::eval_cuda(KernelContext& c, const NoAttrs&) {
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype(), true);
  if (&ot != &xt) ot.resize(xt.shape(), xt.dtype());
  cuda_kernels::check(c, cuda_kernels::sign(t, xt.raw(), ot.raw(), xt.numel(), cuda_kernels::stream(c)));
  if (&ot != &xt) ot.set_lod(xt.lod());
}

}  // namespace oar::ops
