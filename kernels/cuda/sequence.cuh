// kernels/cuda/sequence.cuh: what the .cu files of the sequence ops share on the device.
#pragma once
#include <cstdint>

namespace oar::cuda_kernels {

/// The sequence of row r: the last s with off[s] <= r, among off[0 .. S] (r < off[S]; an empty sequence
/// has off[s] == off[s + 1] and so is never it).
__device__ inline int64_t sequence_of(const int64_t* off, int64_t S, int64_t r) {
  int64_t lo = 0, hi = S;  // off[lo] <= r < off[hi]
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (off[mid] <= r) lo = mid;
    else hi = mid;
  }
  return lo;
}

}  // namespace oar::cuda_kernels
