// kernels/cpu/fill_constant.hpp: fill_constant and fill_constant_batch_size_like on the CPU.
#pragma once
#include <algorithm>

#include "oar/ops/fill_constant.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::cpu_kernels {

/// Element types the creation ops write.
using fill_types = type_list<float, double, int32_t, int64_t, bool, uint8_t, int8_t, int16_t>;

/// out = value in every element, of `dtype` (the attribute; ops without tensor inputs cannot use c.dtype()).
/// requires: shape known.
inline void fill_tensor(const KernelContext& c, LoDTensor& out, const Shape& shape, DType dtype, float value) {
  c.dispatch(fill_types{}, dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    out.resize(shape, dtype);
    T v;
    if constexpr (std::is_same_v<T, bool>) v = value != 0.0f;
    else v = static_cast<T>(value);
    std::fill_n(out.data<T>(), out.numel(), v);
  });
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void FillConstant::eval_cpu(KernelContext& c, const Attrs& a) {
  LoDTensor& o = c.out(out);
  cpu_kernels::fill_tensor(c, o, a.shape, a.dtype, a.value);
  o.clear_lod();
}

inline void FillConstantBatchSizeLike::eval_cpu(KernelContext& c, const Attrs& a) {
  const Shape s = out_shape(c, a.shape, a.input_dim_idx, a.output_dim_idx, c.in(input).shape());
  LoDTensor& o = c.out(out);
  cpu_kernels::fill_tensor(c, o, s, a.dtype, a.value);
  o.clear_lod();
}

}  // namespace oar::ops
