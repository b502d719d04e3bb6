// kernels/cpu/random.hpp: uniform_random, gaussian_random and truncated_gaussian_random on the CPU.
// Generator: the counter-based one of kernels/random_counter.hpp. Element i of a tensor is a pure function of
// (seed, i), so results do not depend on the thread count or chunking, the fill runs in parallel, and the CUDA
// kernels draw the same values.
#pragma once
#include <cmath>

#include "kernels/common/random.hpp"
#include "kernels/random_counter.hpp"

#include "oar/ops/random.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels {

using fn::CounterRng;

inline constexpr int64_t kRandomGrain = 1 << 14;

/// out[i] = gen(i) as T, in parallel over i. requires: Out's `shape` attribute known.
template <class Gen>
void random_fill(KernelContext& c, const ops::tensor_detail::RandomAttrs& a, Gen gen) {
  LoDTensor& out = c.out(ops::tensor_detail::RandomNames::out);
  c.dispatch(type_list<float, double>{}, a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    out.resize(a.shape, a.dtype);
    out.clear_lod();
    T* p = out.data<T>();
    parallel_for(0, out.numel(), kRandomGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) p[i] = T(gen(uint64_t(i)));
    });
  });
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void UniformRandom::eval_cpu(KernelContext& c, const Attrs& a) {
  const cpu_kernels::CounterRng rng(kernels::op_seed(c, a));
  const double lo = a.min, hi = a.max;
  bool f32 = a.dtype == DType::f32;
  cpu_kernels::random_fill(c, a, [&](uint64_t i) {
    double v = lo + (hi - lo) * rng.uniform(i);
    // NOTE: rounding to float can reach max itself; keep the range half-open as Fluid documents it.
    if (f32 && hi > lo && float(v) >= float(hi)) v = std::nextafter(float(hi), float(lo));
    return v;
  });
}

inline void GaussianRandom::eval_cpu(KernelContext& c, const Attrs& a) {
  const cpu_kernels::CounterRng rng(kernels::op_seed(c, a));
  const double mean = a.mean, sd = a.std;
  cpu_kernels::random_fill(c, a, [&](uint64_t i) { return mean + sd * rng.normal(i); });
}

inline void TruncatedGaussianRandom::eval_cpu(KernelContext& c, const Attrs& a) {
  const cpu_kernels::CounterRng rng(kernels::op_seed(c, a));
  const double mean = a.mean, sd = a.std;
  // Rejection: element i tries normals i, i + 2^40, i + 2*2^40, ... until one lies within 2 std (95.4% accept).
  cpu_kernels::random_fill(c, a, [&](uint64_t i) {
    for (uint64_t k = 0;; ++k) {
      double z = rng.normal(i + (k << 40));
      if (std::abs(z) <= 2.0) return mean + sd * z;
    }
  });
}

}  // namespace oar::ops
