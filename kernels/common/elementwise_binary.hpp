// kernels/common/elementwise_binary.hpp: how Y broadcasts over X at run time, checked once for the kernels of
// every place that take two broadcast inputs.
#pragma once
#include <string>

#include "oar/ops/elementwise_binary.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// X's [pre, n, post] view against Y at run time; an oar::Error naming the shapes when they do not broadcast.
/// A scalar-like Y (n == 1) is folded to [pre * post, 1, 1] so that it takes the row path.
inline ops::BroadcastDims run_broadcast(const KernelContext& c, const Tensor& x, const Tensor& y, int axis) {
  ops::BroadcastDims b;
  if (x.shape() == y.shape()) [[likely]] {  // the common case, without broadcast_dims' error string
    b.same = true;
    b.n = x.numel();
  } else {
    std::string why = ops::broadcast_dims(x.shape(), y.shape(), axis, b);
    c.check(why.empty(), "{}", why);
  }
  c.check(x.dtype() == y.dtype(), "X is {} but Y is {}", name(x.dtype()), name(y.dtype()));
  if (!b.same && b.n == 1) b.pre *= b.post, b.post = 1;
  return b;
}

}  // namespace oar::kernels
