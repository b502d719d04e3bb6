// kernels/cpu/fill_zeros_like.hpp: fill_zeros_like on the CPU and, the same code, on CUDA (`any_place`): any
// dtype, zero bytes; a tensor array entry by entry.
#pragma once
#include <cstring>

#include "kernels/cpu/tensor_array.hpp"
#include "oar/ops/fill_zeros_like.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::ops {

inline void FillZerosLike::eval_cpu(KernelContext& c, const NoAttrs&) {
  if (const Value* v = c.in_value(x, 0); v && v->is_list()) [[unlikely]] {  // an array: entry by entry
    const auto& xs = cpu_kernels::array::in(c, x);
    auto& os = cpu_kernels::array::out(c, out);
    if (&os == &xs) {
      for (auto& e : os) cpu_kernels::place_io::zero(c, e.raw(), e.bytes());
      return;
    }
    os.resize(xs.size());
    for (size_t j = 0; j < xs.size(); ++j) {
      if (!xs[j].initialized()) {
        os[j] = LoDTensor();
        continue;
      }
      cpu_kernels::array::zeros(c, os[j], xs[j].shape(), xs[j].dtype());
      os[j].set_lod(xs[j].lod());
    }
    return;
  }
  const LoDTensor& x = c.in(FillZerosLike::x);
  LoDTensor& out = c.out(FillZerosLike::out);
  if (&out != &x) out.resize(x.shape(), x.dtype());
  cpu_kernels::place_io::zero(c, out.raw(), out.bytes());
}

}  // namespace oar::ops
