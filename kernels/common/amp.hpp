// kernels/common/amp.hpp: how check_finite_and_unscale pairs each gradient with the tensor it writes, on every
// place.
#pragma once
#include <cstddef>
#include <utility>

#include "oar/ops/amp.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels::amp {

/// Gradient i of check_finite_and_unscale and the tensor it is written to: a dense gradient's Out[i], or for a
/// SelectedRows gradient its value, unscaled in place (Out[i] must then be X[i]).
inline std::pair<const Tensor*, Tensor*> grad_pair(const KernelContext& c, size_t i) {
  using Op = ops::CheckFiniteAndUnscale;
  const Value* xv = c.in_value(Op::x, i);
  if (xv && xv->is_selected_rows()) {
    c.check(c.out_value(Op::out, i) == xv, "X[{}] ('{}') is SelectedRows: Out[{}] must be the same variable", i, c.in_name(Op::x, i), i);
    Value* v = c.out_value(Op::out, i);
    return {&v->selected_rows().value, &v->selected_rows().value};
  }
  const LoDTensor& x = c.in(Op::x, i);
  LoDTensor& o = c.out(Op::out, i);
  if (&o != &x) {
    o.resize(x.shape(), x.dtype());
    o.set_lod(x.lod());
  }
  return {&x, &o};
}

}  // namespace oar::kernels::amp
