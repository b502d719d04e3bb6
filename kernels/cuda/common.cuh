// kernels/cuda/common.cuh: what every .cu file of the CUDA backend shares: the launch shape, the grid-stride
// loop, the dispatch from Elem to a C++ type, and the launch-error return of kernels/cuda/launch.hpp.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

inline constexpr int kThreads = 256;

/// Blocks for n elements, at most 8 per SM's worth of a large GPU: the grid-stride loops cover the rest.
inline unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return unsigned(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

/// The launch's error (0: none), as launch.hpp promises.
inline int launched() { return int(cudaGetLastError()); }
inline int bad_type() { return int(cudaErrorInvalidValue); }

/// Calls f(T{}) for the floating type `t` names; cudaErrorInvalidValue for another.
template <class F>
int by_float(Elem t, F&& f) {
  switch (t) {
    case Elem::f32: return f(float{});
    case Elem::f64: return f(double{});
    default: return bad_type();
  }
}
/// The same for every type of Elem.
template <class F>
int by_any(Elem t, F&& f) {
  switch (t) {
    case Elem::f32: return f(float{});
    case Elem::f64: return f(double{});
    case Elem::i32: return f(int32_t{});
    case Elem::i64: return f(int64_t{});
    case Elem::b8: case Elem::f16: case Elem::bf16: break;  // cast, the products and convolutions alone take these
  }
  return bad_type();
}

}  // namespace oar::cuda_kernels

/// for (i over [0, n)) spread over the whole grid.
#define OAR_GRID_STRIDE(i, n) \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); i += int64_t(blockDim.x) * gridDim.x)
