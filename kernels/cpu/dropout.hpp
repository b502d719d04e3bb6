// kernels/cpu/dropout.hpp: dropout and dropout_grad on the CPU. The mask is drawn in fixed blocks of 16K
// elements, each from its own generator seeded by (seed, block), so it does not depend on the thread count.
#pragma once
#include <random>

#include "oar/ops/dropout.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels {

inline constexpr int64_t kDropoutBlock = int64_t(1) << 14;
inline constexpr int64_t kDropoutGrain = int64_t(1) << 14;

/// splitmix64: a well-mixed 64-bit value from (seed, block).
inline uint64_t mix_seed(uint64_t seed, uint64_t block) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (block + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void Dropout::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  const double p = a.dropout_prob;
  c.check(p >= 0 && p <= 1, "dropout_prob = {} must be in [0, 1]", p);
  const bool upscale = a.dropout_implementation == Implementation::upscale_in_train;
  const bool test = a.is_test;
  const uint64_t rng_seed = a.fix_seed ? uint64_t(uint32_t(a.seed)) : c.device().next_seed();
  const int64_t n = xt.numel();
  LoDTensor* mask_t = c.has_out(mask) ? &c.out(mask) : nullptr;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    if (&ot != &xt) ot.resize(xt.shape(), xt.dtype());
    if (mask_t) mask_t->resize(xt.shape(), xt.dtype());
    const T* px = xt.data<T>();
    T* po = ot.data<T>();
    T* pk = mask_t ? mask_t->data<T>() : nullptr;
    if (test) {
      const T f = upscale ? T(1) : T(1 - p);
      parallel_for(0, n, cpu_kernels::kDropoutGrain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) po[i] = px[i] * f;
        if (pk) for (int64_t i = lo; i < hi; ++i) pk[i] = T(1);
      });
      return;
    }
    const T f = upscale ? (p < 1 ? T(1 / (1 - p)) : T(0)) : T(1);
    const int64_t blocks = (n + cpu_kernels::kDropoutBlock - 1) / cpu_kernels::kDropoutBlock;
    parallel_for(0, blocks, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t bl = lo; bl < hi; ++bl) {
        std::mt19937_64 rng(cpu_kernels::mix_seed(rng_seed, uint64_t(bl)));
        std::uniform_real_distribution<double> u(0.0, 1.0);
        const int64_t e = std::min(n, (bl + 1) * cpu_kernels::kDropoutBlock);
        for (int64_t i = bl * cpu_kernels::kDropoutBlock; i < e; ++i) {
          const T keep = u(rng) < p ? T(0) : T(1);
          if (pk) pk[i] = keep;
          po[i] = px[i] * keep * f;
        }
      }
    });
  });
  if (&ot != &xt) ot.set_lod(xt.lod());
}

inline void Dropout::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& mask_t = c.in(mask);
  const LoDTensor& dout = c.in(out_grad);
  LoDTensor& dx = c.out(x_grad);
  c.check(dout.shape() == mask_t.shape(), "Out@GRAD {} does not match Mask {}", dout.shape(), mask_t.shape());
  const double p = a.dropout_prob;
  const bool upscale = a.dropout_implementation == Implementation::upscale_in_train;
  const bool test = a.is_test;
  const double f = test ? (upscale ? 1.0 : 1.0 - p) : (upscale ? (p < 1 ? 1.0 / (1.0 - p) : 0.0) : 1.0);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(dout.shape(), dout.dtype());
    const T *pk = mask_t.data<T>(), *pd = dout.data<T>();
    T* px = dx.data<T>();
    const T ft = T(f);
    parallel_for(0, dout.numel(), cpu_kernels::kDropoutGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) px[i] = pd[i] * pk[i] * ft;
    });
  });
  dx.set_lod(dout.lod());
}

}  // namespace oar::ops
