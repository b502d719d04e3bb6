// kernels/common/compare.hpp: the checked inputs and outputs that the comparison and the two-input logical ops'
// kernels on every place start from.
#pragma once
#include "kernels/common/elementwise_binary.hpp"
#include "oar/ops/compare.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// What the comparisons' kernels on every place start from: X, Y, Y's broadcast over X, and Out (bool, X's
/// shape; checked to be neither X nor Y) resized once X's dtype is known to be one they take.
struct ComparePlan {
  const LoDTensor &x, &y;
  ops::BroadcastDims b;
  LoDTensor& out;
};
inline ComparePlan compare_plan(const KernelContext& c, const ops::CompareOp::Attrs& a) {
  using O = ops::CompareOp;
  const LoDTensor& x = c.in(O::x);
  const LoDTensor& y = c.in(O::y);
  const ops::BroadcastDims b = run_broadcast(c, x, y, a.axis);
  LoDTensor& out = c.out(O::out);
  c.check(&out != &x && &out != &y, "Out cannot be X or Y (it is bool, they are {})", name(x.dtype()));
  c.dispatch(type_list<int32_t, int64_t, float, double>{}, x.dtype(), [](auto) {});  // the dtypes both places take
  out.resize(x.shape(), DType::boolean);
  return {x, y, b, out};
}

/// What the two-input logical ops' kernels on every place start from: X and Y checked (bool, one shape), and Out
/// resized to their shape unless it is one of them (in place allowed).
struct LogicalPlan {
  const LoDTensor &x, &y;
  LoDTensor& out;
};
inline LogicalPlan logical_plan(const KernelContext& c) {
  using O = ops::LogicalBinaryOp;
  const LoDTensor& x = c.in(O::x);
  const LoDTensor& y = c.in(O::y);
  c.check(x.dtype() == DType::boolean && y.dtype() == DType::boolean, "X ('{}') and Y ('{}') must be bool, got {} and {}", c.in_name(O::x), c.in_name(O::y),
          name(x.dtype()), name(y.dtype()));
  c.check(x.shape() == y.shape(), "X ('{}') {} and Y ('{}') {} must have the same shape", c.in_name(O::x), x.shape(), c.in_name(O::y), y.shape());
  LoDTensor& out = c.out(O::out);
  if (&out != &x && &out != &y) out.resize(x.shape(), DType::boolean);
  return {x, y, out};
}

}  // namespace oar::kernels
