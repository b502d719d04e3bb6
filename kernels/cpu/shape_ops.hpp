// kernels/cpu/shape_ops.hpp: reshape, flatten, squeeze, unsqueeze and their grads on the CPU: each output
// is a view of its input's storage (no copy).
#pragma once
#include "oar/ops/shape_ops.hpp"
#include "oar/runtime/kernel_context.hpp"

namespace oar::cpu_kernels {

/// Out = `in` seen with shape `s` (shared storage). Keeps the LoD when dim 0 is unchanged.
/// ensures: a later write to either tensor through resize() gets fresh storage (resize never reuses shared
/// storage), so the two never change each other. In-place allowed (Out == In).
inline void view_as(LoDTensor& out, const LoDTensor& in, Shape s) {
  LoD lod = in.rank() > 0 && s.rank() > 0 && s[0] == in.dim(0) ? in.lod() : LoD{};
  out = LoDTensor(in.view(std::move(s)), std::move(lod));
}

/// X@GRAD = Out@GRAD seen with X's shape, for every shape op.
inline void shape_op_backward(KernelContext& c) {
  if (!c.has_out("X@GRAD")) return;
  const LoDTensor& x = c.in("X");
  const LoDTensor& dout = c.in("Out@GRAD");
  c.check(dout.numel() == x.numel(), "Out@GRAD {} does not have the {} elements of X {}", dout.shape(), x.numel(), x.shape());
  LoDTensor& dx = c.out("X@GRAD");
  dx = LoDTensor(dout.view(x.shape()), x.lod());
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void Reshape::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  auto s = c.attr<std::vector<int32_t>>("shape");
  cpu_kernels::view_as(c.out("Out"), x, tensor_detail::reshape_shape(c, x.shape(), {s.begin(), s.end()}));
}
inline void Reshape::eval_grad_cpu(KernelContext& c) { cpu_kernels::shape_op_backward(c); }

inline void Flatten::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  cpu_kernels::view_as(c.out("Out"), x, tensor_detail::flatten_shape(c, x.shape(), c.attr<int32_t>("axis")));
}
inline void Flatten::eval_grad_cpu(KernelContext& c) { cpu_kernels::shape_op_backward(c); }

inline void Squeeze::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  cpu_kernels::view_as(c.out("Out"), x, tensor_detail::squeeze_shape(c, x.shape(), c.attr<std::vector<int32_t>>("axes")));
}
inline void Squeeze::eval_grad_cpu(KernelContext& c) { cpu_kernels::shape_op_backward(c); }

inline void Unsqueeze::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  cpu_kernels::view_as(c.out("Out"), x, tensor_detail::unsqueeze_shape(c, x.shape(), c.attr<std::vector<int32_t>>("axes")));
}
inline void Unsqueeze::eval_grad_cpu(KernelContext& c) { cpu_kernels::shape_op_backward(c); }

}  // namespace oar::ops
