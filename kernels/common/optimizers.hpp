// kernels/common/optimizers.hpp: the checks of the update ops' inputs that serve every place: shapes and dtypes
// against Param, a SelectedRows gradient's rows, the SkipUpdate flag.
#pragma once
#include <cstdint>

#include "oar/ops/optimizers.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels::param_update {

/// Input `slot`, checked to have Param's shape and dtype.
inline const LoDTensor& like_param(const KernelContext& c, Slot slot, const LoDTensor& p) {
  const LoDTensor& t = c.in(slot);
  c.check(t.shape() == p.shape(), "{} {} must have Param's shape {}", slot.name, t.shape(), p.shape());
  c.check(t.dtype() == p.dtype(), "{} is {} but Param is {}", slot.name, name(t.dtype()), name(p.dtype()));
  return t;
}

/// The dense gradient `grad`; an error naming the op when it is SelectedRows (this op takes dense gradients only).
inline const LoDTensor& dense_grad(const KernelContext& c, Slot grad, const LoDTensor& p) {
  Value* v = c.in_value(grad);
  c.check(!(v && v->is_selected_rows()), "Grad is SelectedRows, but {} takes dense gradients only", c.op().type());
  return like_param(c, grad, p);
}

/// The op's SkipUpdate flag (false without the input), checked to be one bool on the kernel's place.
inline const LoDTensor* skip_flag(const KernelContext& c) {
  if (!c.has_in(ops::param_update::skip_update)) return nullptr;
  const LoDTensor& s = c.in(ops::param_update::skip_update);
  c.check(s.numel() == 1 && s.dtype() == DType::boolean, "SkipUpdate must hold one bool, got {} {}", name(s.dtype()), s.shape());
  c.check(s.place() == c.place(), "SkipUpdate is on {}, but the kernel runs on {}", s.place().str(), c.place().str());
  return &s;
}

/// Output `slot` holding a copy of `in` (nothing to do when it is `in` itself, an update in place): for the
/// outputs a skipped or sparse update leaves as they were.
inline LoDTensor& out_copy(const KernelContext& c, Slot slot, const LoDTensor& in) {
  LoDTensor& o = c.out(slot);
  if (&o != &in) {
    o.copy_from(in);
    o.set_lod(in.lod());
  }
  return o;
}

/// A SelectedRows gradient checked against Param [height, w...]: rows in range, value [rows, w...], dtype.
/// Returns the row width w.
inline int64_t check_sparse(const KernelContext& c, const SelectedRows& g, const LoDTensor& p) {
  c.check(p.rank() >= 1, "Param {} must have rank >= 1 for a SelectedRows Grad", p.shape());
  int64_t height = p.dim(0), width = p.shape().numel(1, p.rank());
  c.check(g.height == 0 || g.height == height, "SelectedRows Grad has height {} but Param {} has {} rows", g.height, p.shape(), height);
  c.check(g.value.initialized(), "SelectedRows Grad has no value");
  c.check(g.value.dtype() == p.dtype(), "Grad is {} but Param is {}", name(g.value.dtype()), name(p.dtype()));
  c.check(g.value.numel() == int64_t(g.rows.size()) * width, "SelectedRows Grad value {} does not hold {} rows of width {} (Param {})",
          g.value.shape(), g.rows.size(), width, p.shape());
  for (int64_t r : g.rows) c.check(r >= 0 && r < height, "SelectedRows Grad row {} is out of range for Param {}", r, p.shape());
  return width;
}

}  // namespace oar::kernels::param_update
