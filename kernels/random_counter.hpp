// kernels/random_counter.hpp: the counter-based random stream of the random ops, written once for the CPU and
// the CUDA kernels: draw n of the stream keyed by a seed is a pure function of (seed, n), so a tensor's element
// i is the same whichever device, thread count or chunking filled it.
#pragma once
#include <cmath>
#include <cstdint>

#include "oar/config.hpp"

namespace oar::fn {

/// splitmix64's output function (Steele, Lea, Flood 2014): a bijective 64-bit mixer.
OAR_HD inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Counter-based stream: draw `n` of the stream keyed by `seed` is splitmix64's n-th output from state mix64(seed).
struct CounterRng {
  uint64_t key;
  OAR_HD explicit CounterRng(uint64_t seed) : key(mix64(seed ^ 0x6A09E667F3BCC909ull)) {}
  OAR_HD uint64_t bits(uint64_t n) const { return mix64(key + (n + 1) * 0x9E3779B97F4A7C15ull); }
  /// Uniform in [0, 1) with 53 random bits.
  OAR_HD double uniform(uint64_t n) const { return double(bits(n) >> 11) * 0x1.0p-53; }
  /// Uniform in (0, 1]: safe for log().
  OAR_HD double uniform_open0(uint64_t n) const { return double((bits(n) >> 11) + 1) * 0x1.0p-53; }
  /// A standard normal from draws 2n and 2n+1 (Box-Muller, cosine branch).
  OAR_HD double normal(uint64_t n) const {
    double r = std::sqrt(-2.0 * std::log(uniform_open0(2 * n)));
    return r * std::cos(6.283185307179586476925 * uniform(2 * n + 1));
  }
};

}  // namespace oar::fn
