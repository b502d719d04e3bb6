// kernels/cpu/fill_constant.hpp: fill_constant and fill_constant_batch_size_like on the CPU.
#pragma once
#include <algorithm>

#include "oar/ops/fill_constant.hpp"
#include "oar/runtime/kernel_context.hpp"

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

inline void FillConstant::eval_cpu(KernelContext& c) {
  auto s = c.attr<std::vector<int64_t>>("shape");
  cpu_kernels::fill_tensor(c, c.out("Out"), Shape(s), DType(c.attr<int32_t>("dtype")), c.attr<float>("value"));
  c.out("Out").clear_lod();
}

inline void FillConstantBatchSizeLike::eval_cpu(KernelContext& c) {
  const LoDTensor& in = c.in("Input");
  Shape s = out_shape(c, in.shape());
  cpu_kernels::fill_tensor(c, c.out("Out"), s, DType(c.attr<int32_t>("dtype")), c.attr<float>("value"));
  c.out("Out").clear_lod();
}

}  // namespace oar::ops
