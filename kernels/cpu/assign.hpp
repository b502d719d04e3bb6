// kernels/cpu/assign.hpp: assign, cast and increment on the CPU.
#pragma once
#include <limits>

#include "oar/ops/assign.hpp"
#include "oar/runtime/kernel_context.hpp"
#include "oar/runtime/thread_pool.hpp"

namespace oar::ops {

/// requires: X holds a tensor or SelectedRows. ensures: Out holds a copy in its own storage.
inline void Assign::eval_cpu(KernelContext& c) {
  Value* in = c.in_value("X");
  Value* out = c.out_value("Out");
  c.check(in && out, "X and Out are required");
  if (in == out) return;
  if (in->is_selected_rows()) {
    const SelectedRows& src = in->selected_rows();
    if (!out->is_selected_rows()) out->reset();
    SelectedRows& dst = out->selected_rows();
    dst.rows = src.rows;
    dst.height = src.height;
    dst.value.copy_from(src.value);
    return;
  }
  const LoDTensor& x = c.in("X");
  LoDTensor& y = c.out("Out");
  y.copy_from(x);
  y.set_lod(x.lod());
}

/// requires: X has one element. In-place allowed (Out == X).
inline void Increment::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  LoDTensor& out = c.out("Out");
  c.check(x.numel() == 1, "X must hold exactly one element, X is {}", x.shape());
  const float step = c.attr<float>("step");
  c.dispatch(type_list<float, double, int32_t, int64_t, int16_t, int8_t, uint8_t>{}, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T v = x.data<T>()[0];
    if (&out != &x) out.resize(x.shape(), x.dtype());
    out.data<T>()[0] = static_cast<T>(v + static_cast<T>(step));
  });
}

namespace tensor_detail {
template <class From, class To>
void cast_loop(const From* src, To* dst, int64_t n) {
  parallel_for(0, n, 1 << 15, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      if constexpr (std::is_same_v<To, bool>) {
        dst[i] = src[i] != From(0);
      } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
        From v = src[i];  // saturate (NaN -> 0): a plain conversion of these is undefined behaviour
        constexpr From lo = From(std::numeric_limits<To>::min()), hi = From(std::numeric_limits<To>::max());
        dst[i] = v != v ? To(0) : v <= lo ? std::numeric_limits<To>::min() : v >= hi ? std::numeric_limits<To>::max() : static_cast<To>(v);
      } else {
        dst[i] = static_cast<To>(src[i]);
      }
    }
  });
}
}  // namespace tensor_detail

/// Out = X converted element-wise to out_dtype: float -> integer truncates toward zero and saturates at the
/// integer's range (NaN -> 0); anything -> bool is x != 0.
inline void Cast::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  LoDTensor& out = c.out("Out");
  DType to = DType(c.attr<int32_t>("out_dtype"));
  using types = type_list<bool, int32_t, int64_t, float, double>;
  if (to == x.dtype()) {
    if (&out != &x) out.copy_from(x);
  } else {
    c.check(&out != &x, "cannot cast in place from {} to {}", name(x.dtype()), name(to));
    c.dispatch(types{}, x.dtype(), [&](auto from_tag) {
      using From = typename decltype(from_tag)::type;
      c.dispatch(types{}, to, [&](auto to_tag) {
        using To = typename decltype(to_tag)::type;
        out.resize(x.shape(), to);
        tensor_detail::cast_loop(x.data<From>(), out.data<To>(), x.numel());
      });
    });
  }
  if (&out != &x) out.set_lod(x.lod());
}

}  // namespace oar::ops
