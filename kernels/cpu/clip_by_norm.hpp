// kernels/cpu/clip_by_norm.hpp: clip_by_norm on the CPU.
#pragma once
#include <cmath>

#include "kernels/cpu/sum_all.hpp"
#include "oar/ops/clip_by_norm.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::ops {

/// In place allowed (Out == X).
inline void ClipByNorm::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& x = c.in(ClipByNorm::x);
  LoDTensor& out = c.out(ClipByNorm::out);
  const double max_norm = a.max_norm;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    const double norm = std::sqrt(cpu_kernels::sum_all(x.numel(), [&](int64_t i) { return double(px[i]) * double(px[i]); }));
    const T k = T(max_norm / std::max(norm, max_norm));
    if (&out != &x) out.resize(x.shape(), x.dtype());
    T* po = out.data<T>();
    parallel_for(0, x.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) po[i] = px[i] * k;
    });
  });
  if (&out != &x) out.set_lod(x.lod());
}

}  // namespace oar::ops
