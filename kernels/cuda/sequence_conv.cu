// kernels/cuda/sequence_conv.cu: the device half of sequence_conv (kernels/cuda/sequence_conv.hpp): the
// context columns of every row and their gradient, one thread per element; the products are cuBLAS's.
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/sequence.cuh"
#include "kernels/cuda/sequence_conv_launch.hpp"

namespace oar::cuda_kernels {

namespace {

// col[r, j * D + k] = x[r + start + j, k] inside r's sequence, 0 outside (the CPU's context_columns).
template <class T>
__global__ void context_kernel(const T* x, const int64_t* off, T* col, int64_t N, int64_t S, int64_t D, int start, int len) {
  const int64_t w = int64_t(len) * D;
  OAR_GRID_STRIDE(i, N * w) {
    const int64_t r = i / w, j = (i % w) / D, k = i % D, s = sequence_of(off, S, r), src = r + start + j;
    col[i] = src >= off[s] && src < off[s + 1] ? x[src * D + k] : T(0);
  }
}

// dx[u, k] = 0 + dcol[u - start - j, j * D + k] for j = 0, 1, ... whose output row lies in u's sequence: the
// CPU's order, so the sum is the CPU's.
template <class T>
__global__ void context_grad_kernel(const T* dcol, const int64_t* off, T* dx, int64_t N, int64_t S, int64_t D, int start, int len) {
  const int64_t w = int64_t(len) * D;
  OAR_GRID_STRIDE(i, N * D) {
    const int64_t u = i / D, k = i % D, s = sequence_of(off, S, u), b = off[s], e = off[s + 1];
    T acc = T(0);
    for (int j = 0; j < len; ++j) {
      const int64_t r = u - start - j;
      if (r >= b && r < e) acc += dcol[r * w + int64_t(j) * D + k];
    }
    dx[i] = acc;
  }
}

}  // namespace

int sequence_context(Elem t, const void* x, const int64_t* offsets, void* col, int64_t N, int64_t S, int64_t D, int start, int len, Stream s) {
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    context_kernel<T><<<blocks_for(N * len * D), kThreads, 0, s>>>(static_cast<const T*>(x), offsets, static_cast<T*>(col), N, S, D, start, len);
    return launched();
  });
}

int sequence_context_grad(Elem t, const void* dcol, const int64_t* offsets, void* dx, int64_t N, int64_t S, int64_t D, int start, int len, Stream s) {
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    context_grad_kernel<T><<<blocks_for(N * D), kThreads, 0, s>>>(static_cast<const T*>(dcol), offsets, static_cast<T*>(dx), N, S, D, start, len);
    return launched();
  });
}

}  // namespace oar::cuda_kernels
