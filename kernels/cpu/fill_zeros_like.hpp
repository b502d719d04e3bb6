// kernels/cpu/fill_zeros_like.hpp: fill_zeros_like on the CPU (any dtype: zero bytes).
#pragma once
#include <cstring>

#include "oar/ops/fill_zeros_like.hpp"
#include "oar/runtime/kernel_context.hpp"

namespace oar::ops {

inline void FillZerosLike::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  LoDTensor& out = c.out("Out");
  if (&out != &x) out.resize(x.shape(), x.dtype());
  if (out.bytes()) std::memset(out.raw(), 0, out.bytes());
}

}  // namespace oar::ops
