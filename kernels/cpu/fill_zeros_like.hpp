// kernels/cpu/fill_zeros_like.hpp: fill_zeros_like on the CPU (any dtype: zero bytes).
#pragma once
#include <cstring>

#include "oar/ops/fill_zeros_like.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::ops {

inline void FillZerosLike::eval_cpu(KernelContext& c, const NoAttrs&) {
  const LoDTensor& x = c.in(FillZerosLike::x);
  LoDTensor& out = c.out(FillZerosLike::out);
  if (&out != &x) out.resize(x.shape(), x.dtype());
  if (out.bytes()) std::memset(out.raw(), 0, out.bytes());
}

}  // namespace oar::ops
