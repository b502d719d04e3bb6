// kernels/cpu/tensor_array.hpp: write_to_array, read_from_array (and their gradients) and lod_array_length on the
// CPU and, the same code, on CUDA (the ops are `any_place`: entries are copied on the place, the index is read
// on the host), with the helpers every array kernel uses (the array values of a slot, the index I, empty entries).
#pragma once
#include <cstring>

#include "kernels/cpu/place_io.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/ops/tensor_array.hpp"

namespace oar::cpu_kernels::array {

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

}  // namespace oar::cpu_kernels::array

namespace oar::ops {

/// requires: Out is an array (or holds nothing yet). ensures: Out[i] is a copy of X; entries before i that did
/// not exist are empty; the other entries are untouched.
inline void WriteToArray::eval_cpu(KernelContext& c, const NoAttrs&) {
  const LoDTensor& xt = c.in(x);
  const int64_t at = cpu_kernels::array::index(c, i);
  auto& list = cpu_kernels::array::out(c, out);
  if (int64_t(list.size()) <= at) list.resize(size_t(at + 1));
  cpu_kernels::array::copy(list[size_t(at)], xt);
}

/// X@GRAD = Out@GRAD[i], or zeros shaped like X when that entry is missing or empty.
inline void WriteToArray::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const int64_t at = cpu_kernels::array::index(c, i);
  LoDTensor& dx = c.out(x_grad);
  const LoDTensor* g = nullptr;
  if (c.has_in(out_grad)) {
    const auto& grads = cpu_kernels::array::in(c, out_grad);
    if (at < int64_t(grads.size()) && !cpu_kernels::array::is_empty(grads[size_t(at)])) g = &grads[size_t(at)];
  }
  if (g) {
    c.check(g->shape() == xt.shape() && g->dtype() == xt.dtype(), "entry {} of Out@GRAD ('{}') is {} {}, but X ('{}') is {} {}", at, c.in_name(out_grad),
            name(g->dtype()), g->shape(), c.in_name(x), name(xt.dtype()), xt.shape());
    dx.copy_from(*g);
  } else {
    cpu_kernels::array::zeros(c, dx, xt.shape(), xt.dtype());
  }
  dx.set_lod(xt.lod());
}

inline void ReadFromArray::eval_cpu(KernelContext& c, const NoAttrs&) {
  const auto& list = cpu_kernels::array::in(c, x);
  const int64_t at = cpu_kernels::array::index(c, i);
  c.check(at < int64_t(list.size()), "index {} is out of range of the array '{}' ({} entries)", at, c.in_name(x), list.size());
  const LoDTensor& e = list[size_t(at)];
  c.check(e.initialized(), "entry {} of the array '{}' was never written", at, c.in_name(x));
  cpu_kernels::array::copy(c.out(out), e);
}

/// X@GRAD: as many entries as X, entry i a copy of Out@GRAD, the others empty.
inline void ReadFromArray::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  if (!c.has_out(x_grad)) return;
  const auto& list = cpu_kernels::array::in(c, x);
  const int64_t at = cpu_kernels::array::index(c, i);
  c.check(at < int64_t(list.size()), "index {} is out of range of the array '{}' ({} entries)", at, c.in_name(x), list.size());
  const LoDTensor& g = c.in(out_grad);
  auto& dx = cpu_kernels::array::out(c, x_grad);
  dx.resize(list.size());
  for (size_t k = 0; k < dx.size(); ++k)
    if (int64_t(k) != at) dx[k] = LoDTensor();
  cpu_kernels::array::copy(dx[size_t(at)], g);
}

inline void LoDArrayLength::eval_cpu(KernelContext& c, const NoAttrs&) {
  const auto& list = cpu_kernels::array::in(c, x);
  LoDTensor& o = c.out(out);
  o.resize(Shape{1}, DType::i64);
  const int64_t n = int64_t(list.size());
  cpu_kernels::place_io::store(c, o, &n);
}

}  // namespace oar::ops
