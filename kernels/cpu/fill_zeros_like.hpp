// kernels/cpu/fill_zeros_like.hpp: fill_zeros_like on the CPU (any dtype: zero bytes).
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
      for (auto& e : os)
        if (e.bytes()) std::memset(e.raw(), 0, e.bytes());
      return;
    }
    os.resize(xs.size());
    for (size_t j = 0; j < xs.size(); ++j) {
      if (!xs[j].initialized()) {
        os[j] = LoDTensor();
        continue;
      }
      os[j].set_place(c.place());
      cpu_kernels::array::zeros(os[j], xs[j].shape(), xs[j].dtype());
      os[j].set_lod(xs[j].lod());
    }
    return;
  }
  const LoDTensor& x = c.in(FillZerosLike::x);
  LoDTensor& out = c.out(FillZerosLike::out);
  if (&out != &x) out.resize(x.shape(), x.dtype());
  if (out.bytes()) std::memset(out.raw(), 0, out.bytes());
}

}  // namespace oar::ops
