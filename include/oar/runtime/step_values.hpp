// oar/runtime/step_values.hpp: how the control-flow ops move values between an outer scope and their step
// scopes (rows of a step in and out, zeros, gradients summed across steps), on whichever place the block runs.
// Used by control_flow-inl.hpp and recurrent-inl.hpp only.
#pragma once
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "oar/device/kernel_context.hpp"
#include "oar/device/scope.hpp"

namespace oar {

namespace detail {

/// `t` shaped like `like` with `rows` rows, same dtype, on the kernel's place (a scope's fresh value is on the
/// CPU until something puts it elsewhere).
inline void resize_rows(const KernelContext& c, LoDTensor& t, const Shape& like, DType dtype, int64_t rows) {
  Shape s = like;
  s[0] = rows;
  t.resize(s, dtype, c.place());
}

/// Zeros `t`, which lives on the kernel's place (on a GPU: queued on its stream).
inline void zero(const KernelContext& c, Tensor& t) {
  if (!t.bytes()) return;
  if (c.place().is_cuda()) oar::detail::cuda_zero(c.cuda(), t.raw(), t.bytes());
  else std::memset(t.raw(), 0, t.bytes());
}

/// `bytes` from src to dst, both in the memory of the kernel's place (on a GPU: queued on its stream).
inline void copy_bytes(const KernelContext& c, void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  if (c.place().is_cuda()) oar::detail::cuda_copy_rows(c.cuda(), dst, bytes, src, bytes, bytes, 1);
  else std::memcpy(dst, src, bytes);
}

/// n rows of `rb` bytes: row dst_rows[r] of dst = row src_rows[r] of src (row r where a list is null). The
/// lists live where the kernel runs: on the host for the CPU, in the device's memory for a GPU (one kernel).
inline void move_rows(const KernelContext& c, void* dst, const void* src, size_t rb, int64_t n, const int64_t* dst_rows, const int64_t* src_rows) {
  if (!rb || n <= 0) return;
  if (c.place().is_cuda()) return oar::detail::cuda_move_rows(c.cuda(), dst, src, rb, n, dst_rows, src_rows);
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  for (int64_t r = 0; r < n; ++r) std::memcpy(d + size_t(dst_rows ? dst_rows[r] : r) * rb, s + size_t(src_rows ? src_rows[r] : r) * rb, rb);
}

/// Variable `name` of a step scope (a recurrent op's attributes name them) as a tensor; an oar::Error naming it
/// when the step block has none (a program read from a damaged file).
inline LoDTensor& step_tensor(const KernelContext& c, Scope& step, const std::string& name) {
  Value* v = step.find_local(name);
  c.check(v != nullptr, "the step block has no variable '{}'", name);
  return v->tensor();
}

/// The first n elements of dst += those of src (f32 / f64: the gradients a recurrent op moves between steps),
/// starting `dst_at` and `src_at` elements in.
inline void add_elements(const KernelContext& c, Tensor& dst, const Tensor& src, int64_t n, int64_t dst_at = 0, int64_t src_at = 0) {
  c.check(dst.dtype() == src.dtype() && src.numel() >= src_at + n && dst.numel() >= dst_at + n, "adding a {} {} gradient to a {} {} one",
          oar::name(src.dtype()), src.shape(), oar::name(dst.dtype()), dst.shape());
  c.dispatch(type_list<float, double>{}, dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* d = static_cast<T*>(dst.raw()) + dst_at;
    const T* s = static_cast<const T*>(src.raw()) + src_at;
    if (c.place().is_cuda()) return oar::detail::cuda_accumulate(c.cuda(), dst.dtype(), d, s, n);
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  });
}

}  // namespace detail

namespace detail {

/// Before a loop's steps add into a gradient: it holds nothing (its storage and capacity are kept), on the
/// kernel's place.
inline void reset_sum(const KernelContext& c, Value& v) {
  if (LoDTensor* t = v.tensor_if()) t->resize(Shape{0}, t->dtype(), c.place());
  else if (v.is_list()) v.list().clear();
  else if (v.is_selected_rows()) {
    SelectedRows& r = v.selected_rows();
    r.rows.clear();
    r.value = Tensor();
  }
}

/// Whether reset_sum's "nothing" is still there.
inline bool holds_nothing(const Value& v) {
  if (const LoDTensor* t = v.tensor_if()) return !t->initialized() || t->numel() == 0;
  return v.empty();
}

/// dst = dst + src for a gradient the steps of a loop sum: tensors of f32 / f64; tensor arrays entry by entry
/// (an empty entry is zero); sparse rows (SelectedRows, an embedding's gradient) by appending rows, as Fluid's
/// sum does. A dst that holds nothing yet takes a copy.
inline void accumulate(const KernelContext& c, Value& dst, const Value& src, const std::string& name) {
  if (const LoDTensor* st = src.tensor_if()) {
    if (!st->initialized()) return;
    c.check(!dst.is_selected_rows() || dst.selected_rows().rows.empty(), "the gradient of '{}' is sparse at one step and dense at another", name);
    if (dst.is_selected_rows()) dst.reset();
    LoDTensor* dt = dst.tensor_if();
    if (!dt || !dt->initialized() || dt->numel() == 0) {
      dst.tensor().copy_from(*st);
      dst.tensor().set_lod(st->lod());
      return;
    }
    if (st->numel() == 0) return;
    c.check(dt->numel() == st->numel(), "the gradient of '{}' is {} at one step and {} at another", name, st->shape(), dt->shape());
    add_elements(c, *dt, *st, st->numel());
    return;
  }
  if (src.is_list()) {
    const auto& sl = const_cast<Value&>(src).list();
    auto& dl = dst.list();
    if (dl.size() < sl.size()) dl.resize(sl.size());
    for (size_t k = 0; k < sl.size(); ++k) {
      if (!sl[k].initialized() || sl[k].numel() == 0) continue;
      if (!dl[k].initialized() || dl[k].numel() == 0) {
        dl[k].copy_from(sl[k]);
        dl[k].set_lod(sl[k].lod());
        continue;
      }
      c.check(dl[k].numel() == sl[k].numel(), "the gradient of '{}' entry {} is {} at one step and {} at another", name, k, sl[k].shape(), dl[k].shape());
      add_elements(c, dl[k], sl[k], sl[k].numel());
    }
    return;
  }
  if (src.is_selected_rows()) {
    const SelectedRows& sr = const_cast<Value&>(src).selected_rows();
    if (sr.rows.empty()) return;
    c.check(holds_nothing(dst) || dst.is_selected_rows(), "the gradient of '{}' is dense at one step and sparse at another", name);
    if (!dst.is_selected_rows()) dst.reset();
    SelectedRows& dr = dst.selected_rows();
    if (dr.rows.empty()) {
      dr.rows = sr.rows, dr.height = sr.height, dr.value = sr.value.clone();
      return;
    }
    c.check(dr.height == sr.height && dr.value.dtype() == sr.value.dtype() && dr.value.numel() / int64_t(dr.rows.size()) == sr.value.numel() / int64_t(sr.rows.size()),
            "the sparse gradient of '{}' changes its shape between steps", name);
    Shape shape = dr.value.shape();
    shape[0] = int64_t(dr.rows.size() + sr.rows.size());
    Tensor joined(shape, dr.value.dtype(), dr.value.place());
    copy_bytes(c, joined.raw(), dr.value.raw(), dr.value.bytes());
    copy_bytes(c, static_cast<char*>(joined.raw()) + dr.value.bytes(), sr.value.raw(), sr.value.bytes());
    dr.rows.insert(dr.rows.end(), sr.rows.begin(), sr.rows.end());
    dr.value = std::move(joined);
  }
}

/// A zero gradient for `x`: zeros of its shape (a tensor), or as many empty entries (a tensor array).
inline void zero_like(const KernelContext& c, Value& g, const Value& x) {
  if (const LoDTensor* xt = x.tensor_if()) {
    LoDTensor& gt = g.tensor();
    gt.resize(xt->shape(), xt->dtype(), c.place());
    zero(c, gt);
    gt.set_lod(xt->lod());
  } else if (x.is_list()) {
    auto& gl = g.list();
    gl.assign(const_cast<Value&>(x).list().size(), LoDTensor());
  }
}

/// A copy of a loop variable's value that no later step writes into: tensors deep, arrays entry by entry.
inline void copy_value(Value& dst, const Value& src) {
  if (const LoDTensor* st = src.tensor_if()) {
    LoDTensor& dt = dst.tensor();
    if (st->initialized()) dt.copy_from(*st);
    dt.set_lod(st->lod());
  } else if (src.is_list()) {
    const auto& sl = const_cast<Value&>(src).list();
    auto& dl = dst.list();
    dl.resize(sl.size());
    for (size_t k = 0; k < sl.size(); ++k) {
      if (sl[k].initialized()) dl[k].copy_from(sl[k]);
      dl[k].set_lod(sl[k].lod());
    }
  } else {
    dst = src;
  }
}

}  // namespace detail

}  // namespace oar
