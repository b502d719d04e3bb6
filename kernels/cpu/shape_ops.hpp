// kernels/cpu/shape_ops.hpp: reshape, flatten, squeeze, unsqueeze and their grads on the CPU: each output
// is a view of its input's storage (no copy).
#pragma once
#include "oar/ops/shape_ops.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::cpu_kernels {

/// Out = `in` seen with shape `s` (shared storage). Keeps the LoD when dim 0 is unchanged.
/// ensures: a later write to either tensor through resize() gets fresh storage (resize never reuses shared
/// storage), so the two never change each other. In-place allowed (Out == In).
inline void view_as(LoDTensor& out, const LoDTensor& in, Shape s) {
  const bool keep_lod = in.rank() > 0 && s.rank() > 0 && s[0] == in.dim(0);
  // Assign the tensor part and the LoD separately: copy-assigning the LoD reuses Out's buffers (no heap in
  // steady state), and with Out == In the LoD kept is In's own.
  static_cast<Tensor&>(out) = in.view(std::move(s));
  if (keep_lod) out.set_lod(in.lod());
  else out.clear_lod();
}

/// X@GRAD = Out@GRAD seen with X's shape, for every shape op.
inline void shape_op_backward(KernelContext& c) {
  using N = ops::tensor_detail::ShapeOpNames;
  if (!c.has_out(N::x_grad)) return;
  const LoDTensor& x = c.in(N::x);
  const LoDTensor& dout = c.in(N::out_grad);
  c.check(dout.numel() == x.numel(), "Out@GRAD {} does not have the {} elements of X {}", dout.shape(), x.numel(), x.shape());
  LoDTensor& dx = c.out(N::x_grad);
  static_cast<Tensor&>(dx) = dout.view(x.shape());
  dx.set_lod(x.lod());
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void Reshape::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  cpu_kernels::view_as(c.out(out), xt, tensor_detail::reshape_shape(c, xt.shape(), a.shape));
}
inline void Reshape::eval_grad_cpu(KernelContext& c, const Attrs&) { cpu_kernels::shape_op_backward(c); }

inline void Flatten::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  cpu_kernels::view_as(c.out(out), xt, tensor_detail::flatten_shape(c, xt.shape(), a.axis));
}
inline void Flatten::eval_grad_cpu(KernelContext& c, const Attrs&) { cpu_kernels::shape_op_backward(c); }

inline void Squeeze::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  cpu_kernels::view_as(c.out(out), xt, tensor_detail::squeeze_shape(c, xt.shape(), a.axes));
}
inline void Squeeze::eval_grad_cpu(KernelContext& c, const Attrs&) { cpu_kernels::shape_op_backward(c); }

inline void Unsqueeze::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  cpu_kernels::view_as(c.out(out), xt, tensor_detail::unsqueeze_shape(c, xt.shape(), a.axes));
}
inline void Unsqueeze::eval_grad_cpu(KernelContext& c, const Attrs&) { cpu_kernels::shape_op_backward(c); }

}  // namespace oar::ops
