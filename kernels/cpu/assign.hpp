// kernels/cpu/assign.hpp: assign, cast and increment on the CPU.
#pragma once
#include <limits>

#include "kernels/cast.hpp"
#include "oar/ops/assign.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::ops {

/// requires: X holds a tensor or SelectedRows. ensures: Out holds a copy in its own storage.
inline void Assign::eval_cpu(KernelContext& c, const NoAttrs&) {
  Value* iv = c.in_value(x);
  Value* ov = c.out_value(out);
  c.check(iv && ov, "X and Out are required");
  if (iv == ov) return;
  if (iv->is_selected_rows()) {
    const SelectedRows& src = iv->selected_rows();
    if (!ov->is_selected_rows()) ov->reset();
    SelectedRows& dst = ov->selected_rows();
    dst.rows = src.rows;
    dst.height = src.height;
    dst.value.copy_from(src.value);
    return;
  }
  const LoDTensor& xt = c.in(x);
  LoDTensor& y = c.out(out);
  y.copy_from(xt);
  y.set_lod(xt.lod());
}

/// requires: X has one element. In-place allowed (Out == X).
inline void Increment::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  c.check(xt.numel() == 1, "X must hold exactly one element, X is {}", xt.shape());
  const float step = a.step;
  c.dispatch(type_list<float, double, int32_t, int64_t, int16_t, int8_t, uint8_t>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = xt.data<T>()[0];
    if (&ot != &xt) ot.resize(xt.shape(), xt.dtype());
    ot.data<T>()[0] = static_cast<T>(v + static_cast<T>(step));
  });
}

namespace tensor_detail {
template <class From, class To>
void cast_loop(const From* src, To* dst, int64_t n) {
  parallel_for(0, n, 1 << 15, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) dst[i] = fn::cast_value<From, To>(src[i]);
  });
}
}  // namespace tensor_detail

/// Out = X converted element-wise to out_dtype (fn::cast_value: float -> integer truncates and saturates,
/// anything -> bool is x != 0, f16 and bf16 round to nearest even).
inline void Cast::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  const DType to = a.out_dtype;
  using types = type_list<bool, int32_t, int64_t, float, double, half, bfloat16>;
  if (to == xt.dtype()) {
    if (&ot != &xt) ot.copy_from(xt);
  } else {
    c.check(&ot != &xt, "cannot cast in place from {} to {}", name(xt.dtype()), name(to));
    c.dispatch(types{}, xt.dtype(), [&](auto from_tag) {
      using From = typename decltype(from_tag)::type;
      c.dispatch(types{}, to, [&](auto to_tag) {
        using To = typename decltype(to_tag)::type;
        ot.resize(xt.shape(), to);
        tensor_detail::cast_loop(xt.data<From>(), ot.data<To>(), xt.numel());
      });
    });
  }
  if (&ot != &xt) ot.set_lod(xt.lod());
}

}  // namespace oar::ops
