// kernels/cuda/random_launch.hpp: the launchers random.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

// the counter-based generator of kernels/random_counter.hpp, so a seed gives the CPU's values.
/// out[i] = lo + (hi - lo) u_i, kept below hi in f32.
int uniform_random(Elem t, void* out, int64_t n, uint64_t seed, double lo, double hi, Stream s);
/// out[i] = mean + std z_i (z_i standard normal; `truncated`: redrawn until |z| <= 2).
int gaussian_random(Elem t, void* out, int64_t n, uint64_t seed, double mean, double std, bool truncated, Stream s);

}  // namespace oar::cuda_kernels
