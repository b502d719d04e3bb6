// kernels/common/arg_max.hpp: X around arg_max's / arg_min's axis and Out's shape, checked once for every place.
#pragma once
#include <cstdint>

#include "oar/ops/arg_max.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// X seen as [outer, n, inner] around arg_max / arg_min's axis, and Out's shape; both devices' kernels start here.
struct ArgPlan {
  int64_t outer, n, inner;
  Shape out;
};
inline ArgPlan arg_plan(const KernelContext& c, const Tensor& x, const ops::tensor_detail::ArgAttrs& a) {
  using N = ops::tensor_detail::ArgNames;
  c.check(x.rank() >= 1, "X must have rank >= 1, got {}", x.shape());
  const int axis = ops::tensor_detail::normalize_axis(c, a.axis, x.rank(), N::axis, x.shape());
  ArgPlan p{x.shape().numel(0, axis), x.dim(axis), x.shape().numel(axis + 1, x.rank()), x.shape()};
  c.check(p.n > 0 || p.outer * p.inner == 0, "{} over an empty axis {} of X {}", c.op().type(), axis, x.shape());
  if (a.keepdims) p.out[axis] = 1;
  else p.out.erase(axis);
  return p;
}

}  // namespace oar::kernels
