// kernels/common/tensor_array.hpp: what every tensor-array kernel uses, on every place: the array values of a
// slot, the index I read on the host, copies and zeros of entries where the kernel runs.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/place_io.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels::array {

using TensorList = Value::TensorList;

/// An entry that holds nothing: never written, or written with 0 elements (a gradient's untouched entry).
inline bool is_empty(const LoDTensor& t) { return !t.initialized() || t.numel() == 0; }

/// The array of input `slot`; an oar::Error naming the variable when it is missing or holds no array.
inline const TensorList& in(const KernelContext& c, Slot slot, size_t i = 0) {
  Value* v = c.in_value(slot, i);
  c.check(v != nullptr, "input {} is missing", slot.name);
  if (v->empty()) v->init(VarKind::lod_tensor_array);  // declared but never written: an empty array
  c.check(v->is_list(), "input {} ('{}') must be a tensor array, it holds a {}", slot.name, c.in_name(slot, i), v->is_tensor() ? "tensor" : "non-array value");
  return v->list();
}

/// The array of output `slot` (made an array when the variable holds nothing yet).
inline TensorList& out(const KernelContext& c, Slot slot, size_t i = 0) {
  Value* v = c.out_value(slot, i);
  c.check(v != nullptr, "output {} is missing", slot.name);
  if (const LoDTensor* t = v->tensor_if(); t && !t->initialized()) v->reset();  // a fresh variable declared as a tensor
  if (v->empty()) v->init(VarKind::lod_tensor_array);
  c.check(v->is_list(), "output {} ('{}') must be a tensor array, it holds a {}", slot.name, c.out_name(slot, i), v->is_tensor() ? "tensor" : "non-array value");
  return v->list();
}

/// The value of the index input `slot`: one i64 (or i32) element, >= 0.
inline int64_t index(const KernelContext& c, Slot slot) {
  const LoDTensor& t = c.in(slot);
  c.check(t.numel() == 1, "{} ('{}') must hold exactly one element, got {}", slot.name, c.in_name(slot), t.shape());
  int64_t i = 0;
  if (t.dtype() == DType::i64) i = place_io::host(c, t).data<int64_t>()[0];
  else if (t.dtype() == DType::i32) i = place_io::host(c, t).data<int32_t>()[0];
  else c.fail("{} ('{}') is an index and must be i64 (or i32), got {}", slot.name, c.in_name(slot), name(t.dtype()));
  c.check(i >= 0, "{} ('{}') is a negative index {}", slot.name, c.in_name(slot), i);
  return i;
}

/// dst = a copy of src's data and LoD in dst's own storage.
inline void copy(LoDTensor& dst, const LoDTensor& src) {
  dst.copy_from(src);
  dst.set_lod(src.lod());
}

/// dst = zeros of `shape` and `dtype` on the kernel's place.
inline void zeros(const KernelContext& c, LoDTensor& dst, const Shape& shape, DType dtype) {
  dst.set_place(c.place());
  dst.resize(shape, dtype);
  place_io::zero(c, dst.raw(), dst.bytes());
}

}  // namespace oar::kernels::array
