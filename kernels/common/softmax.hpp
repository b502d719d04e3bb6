// kernels/common/softmax.hpp: X around the softmax axis and the checked inputs and outputs that softmax's and
// log_softmax's kernels on every place start from.
#pragma once
#include <cstdint>

#include "oar/ops/softmax.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// `s` seen as [pre, n, post] around `axis` (negative counts from the back).
struct AxisSplit {
  int64_t pre = 1, n = 1, post = 1;
};
inline AxisSplit split_at_axis(const Shape& s, int axis) {
  if (axis < 0) axis += s.rank();
  return {s.numel(0, axis), s[axis], s.numel(axis + 1, s.rank())};
}

/// What softmax's and log_softmax's (`Op`) kernels on every place start from: X, Out, and X seen as
/// [pre, n, post] around `axis` (checked to be one of X's dims).
struct SoftmaxPlan {
  const LoDTensor& x;
  LoDTensor& out;
  AxisSplit sp;
};
template <class Op>
SoftmaxPlan softmax_plan(const KernelContext& c, int axis) {
  const LoDTensor& x = c.in(Op::x);
  LoDTensor& out = c.out(Op::out);
  c.check(axis >= -x.rank() && axis < x.rank(), "axis = {} is out of range for X {}", axis, x.shape());
  return {x, out, split_at_axis(x.shape(), axis)};
}

/// The same for the gradient: Out, Out@GRAD checked to match it, X@GRAD sized as Out with its LoD, and Out seen
/// as [pre, n, post] around `axis`.
struct SoftmaxGradPlan {
  const LoDTensor &out, &out_grad;
  LoDTensor& x_grad;
  AxisSplit split;
};
template <class Op>
SoftmaxGradPlan softmax_grad_plan(const KernelContext& c, int axis) {
  const LoDTensor& y = c.in(Op::out);
  const LoDTensor& dy = c.in(Op::out_grad);
  LoDTensor& dx = c.out(Op::x_grad);
  c.check(dy.shape() == y.shape(), "Out@GRAD {} does not match Out {}", dy.shape(), y.shape());
  dx.resize(y.shape(), y.dtype());
  dx.set_lod(y.lod());
  return {y, dy, dx, split_at_axis(y.shape(), axis)};
}

}  // namespace oar::kernels
