// kernels/cpu/sign.hpp: sign on the CPU.
#pragma once
#include "oar/ops/sign.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::ops {

inline void Sign::eval_cpu(KernelContext& c, const NoAttrs&) {
  const LoDTensor& x = c.in(Sign::x);
  LoDTensor& out = c.out(Sign::out);
  c.dispatch(type_list<float, double, int32_t, int64_t>{}, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (&out != &x) out.resize(x.shape(), x.dtype());
    const T* px = x.data<T>();
    T* po = out.data<T>();
    parallel_for(0, x.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const T v = px[i];
        po[i] = v > T(0) ? T(1) : (v < T(0) ? T(-1) : v);  // keeps 0, -0 and NaN
      }
    });
  });
  if (&out != &x) out.set_lod(x.lod());
}

}  // namespace oar::ops
