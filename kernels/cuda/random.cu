// kernels/cuda/random.cu: uniform_random and gaussian_random on the device, from the counter-based stream the CPU
// kernels use (kernels/random_counter.hpp): element i is a function of (seed, i) alone, so a seed fills a tensor
// with the CPU's values (up to the last bits of the device's log and cos).
#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/random_launch.hpp"
#include "kernels/random_counter.hpp"

namespace oar::cuda_kernels {

namespace {

template <class T>
__global__ void uniform_kernel(T* out, int64_t n, uint64_t seed, double lo, double hi) {
  const fn::CounterRng rng(seed);
  OAR_GRID_STRIDE(i, n) {
    double v = lo + (hi - lo) * rng.uniform(uint64_t(i));
    // Rounding to float can reach hi itself; keep the range half-open, as the CPU kernel does.
    if constexpr (sizeof(T) == sizeof(float))
      if (hi > lo && float(v) >= float(hi)) v = nextafterf(float(hi), float(lo));
    out[i] = T(v);
  }
}
template <class T>
__global__ void gaussian_kernel(T* out, int64_t n, uint64_t seed, double mean, double sd, bool truncated) {
  const fn::CounterRng rng(seed);
  OAR_GRID_STRIDE(i, n) {
    double z = rng.normal(uint64_t(i));
    // Truncated: element i tries normals i, i + 2^40, i + 2 * 2^40, ... until one lies within 2 std.
    for (uint64_t k = 1; truncated && fabs(z) > 2.0; ++k) z = rng.normal(uint64_t(i) + (k << 40));
    out[i] = T(mean + sd * z);
  }
}

}  // namespace

int uniform_random(Elem t, void* out, int64_t n, uint64_t seed, double lo, double hi, Stream s) {
  if (n == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    uniform_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(out), n, seed, lo, hi);
    return launched();
  });
}

int gaussian_random(Elem t, void* out, int64_t n, uint64_t seed, double mean, double std, bool truncated, Stream s) {
  if (n == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    gaussian_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(out), n, seed, mean, std, truncated);
    return launched();
  });
}

}  // namespace oar::cuda_kernels
