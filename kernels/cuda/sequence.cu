// kernels/cuda/sequence.cu: the device kernels of sequence_pool, sequence_softmax and their gradients, and
// sequence_expand's gradient (kernels/cuda/sequence.hpp is the host side; expand's forward is a copy_rows of
// sequence_shape.cu). The LoD's offsets come uploaded per call as int64; each sum runs in one fixed order (the
// CPU's row order where one thread owns it, a fixed warp tree for softmax), so a result repeats bit for bit.
// Launched through kernels/cuda/sequence_launch.hpp.
#include <cmath>
#include <limits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/sequence.cuh"
#include "kernels/cuda/sequence_launch.hpp"

namespace oar::cuda_kernels {

namespace {

// One thread per (sequence s, column d), the rows in the CPU's order: out = first row, then += (or the max's
// strict >) each later one; AVERAGE / SQRT divide by len / sqrt(len) as the CPU does (no reciprocal).
template <class T>
__global__ void pool_kernel(SeqPool type, const T* x, const int64_t* off, T* out, int32_t* idx, int64_t S, int64_t D) {
  OAR_GRID_STRIDE(k, S * D) {
    const int64_t s = k / D, d = k % D, b = off[s], e = off[s + 1], len = e - b;
    if (len == 0) {
      out[k] = T(0);
      if (idx) idx[k] = -1;
      continue;
    }
    switch (type) {
      case SeqPool::first: out[k] = x[b * D + d]; break;
      case SeqPool::last: out[k] = x[(e - 1) * D + d]; break;
      case SeqPool::max: {
        T m = x[b * D + d];
        int32_t at = int32_t(b);
        for (int64_t r = b + 1; r < e; ++r) {
          const T v = x[r * D + d];
          if (v > m) m = v, at = int32_t(r);
        }
        out[k] = m;
        if (idx) idx[k] = at;
        break;
      }
      default: {
        T acc = x[b * D + d];
        for (int64_t r = b + 1; r < e; ++r) acc += x[r * D + d];
        if (type == SeqPool::average) acc /= T(len);
        else if (type == SeqPool::sqrt) acc /= std::sqrt(T(len));
        out[k] = acc;
      }
    }
  }
}

// One thread per element of X: its sequence by binary search, then the CPU's value for it.
template <class T>
__global__ void pool_grad_kernel(SeqPool type, const T* dout, const int32_t* idx, const int64_t* off, T* dx, int64_t N, int64_t S, int64_t D) {
  OAR_GRID_STRIDE(k, N * D) {
    const int64_t r = k / D, d = k % D, s = sequence_of(off, S, r), b = off[s], e = off[s + 1], len = e - b;
    const T g = dout[s * D + d];
    switch (type) {
      case SeqPool::sum: dx[k] = g / T(1); break;
      case SeqPool::average: dx[k] = g / T(len); break;
      case SeqPool::sqrt: dx[k] = g / std::sqrt(T(len)); break;
      case SeqPool::first: dx[k] = r == b ? g : T(0); break;
      case SeqPool::last: dx[k] = r == e - 1 ? g : T(0); break;
      case SeqPool::max: dx[k] = int64_t(idx[s * D + d]) == r ? g : T(0); break;
    }
  }
}

inline constexpr int kWarps = kThreads / 32;

/// The sum (or max) of one value per lane over a warp, in a fixed tree: every lane gets the same result.
template <bool max, class T>
__device__ inline T warp_reduce(T v) {
  for (int o = 16; o > 0; o /= 2) {
    const T w = __shfl_xor_sync(0xffffffffu, v, o);
    if constexpr (max) v = w > v ? w : v;  // the CPU's line_max step
    else v += w;
  }
  return v;
}

// One warp per sequence: the max (as the CPU's line_max: -inf, then the greater), the sum of exp(x - max) over
// the lanes' strided slices then a warp tree, y = e * (1 / sum) as the CPU's softmax_line.
template <class T>
__global__ void softmax_kernel(const T* x, const int64_t* off, T* y, int64_t S) {
  const int lane = threadIdx.x % 32;
  for (int64_t s = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; s < S; s += int64_t(gridDim.x) * kWarps) {
    const int64_t b = off[s], e = off[s + 1];
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t r = b + lane; r < e; r += 32) m = x[r] > m ? x[r] : m;
    m = warp_reduce<true>(m);
    T sum = 0;
    for (int64_t r = b + lane; r < e; r += 32) sum += std::exp(x[r] - m);
    sum = warp_reduce<false>(sum);
    const T inv = T(1) / sum;
    for (int64_t r = b + lane; r < e; r += 32) y[r] = std::exp(x[r] - m) * inv;
  }
}

// One warp per sequence: acc = sum of dy * y (lanes' slices, then a warp tree), dx = y (dy - acc).
template <class T>
__global__ void softmax_grad_kernel(const T* y, const T* dy, const int64_t* off, T* dx, int64_t S) {
  const int lane = threadIdx.x % 32;
  for (int64_t s = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; s < S; s += int64_t(gridDim.x) * kWarps) {
    const int64_t b = off[s], e = off[s + 1];
    T acc = 0;
    for (int64_t r = b + lane; r < e; r += 32) acc += dy[r] * y[r];
    acc = warp_reduce<false>(acc);
    for (int64_t r = b + lane; r < e; r += 32) dx[r] = y[r] * (dy[r] - acc);
  }
}

/// Blocks of kWarps warps for one warp per sequence (the grid-stride loop covers the rest).
inline unsigned blocks_for_warps(int64_t S) {
  const int64_t b = (S + kWarps - 1) / kWarps;
  return unsigned(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

// dx row r = the sum over j < plan[3r + 1] of dout row plan[3r] + j plan[3r + 2], from 0 in j's order (the CPU's).
template <class T>
__global__ void expand_grad_kernel(const T* dout, const int64_t* plan, T* dx, int64_t M, int64_t D) {
  OAR_GRID_STRIDE(k, M * D) {
    const int64_t r = k / D, d = k % D, first = plan[3 * r], n = plan[3 * r + 1], step = plan[3 * r + 2];
    T acc = T(0);
    for (int64_t j = 0; j < n; ++j) acc += dout[(first + j * step) * D + d];
    dx[k] = acc;
  }
}

}  // namespace

int sequence_pool(SeqPool type, Elem t, const void* x, const int64_t* offsets, void* out, int32_t* max_index, int64_t S, int64_t D, Stream s) {
  if (S * D == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    pool_kernel<<<blocks_for(S * D), kThreads, 0, s>>>(type, static_cast<const T*>(x), offsets, static_cast<T*>(out), max_index, S, D);
    return launched();
  });
}

int sequence_pool_grad(SeqPool type, Elem t, const void* dout, const int32_t* max_index, const int64_t* offsets, void* dx, int64_t N, int64_t S, int64_t D,
                       Stream s) {
  if (N * D == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    pool_grad_kernel<<<blocks_for(N * D), kThreads, 0, s>>>(type, static_cast<const T*>(dout), max_index, offsets, static_cast<T*>(dx), N, S, D);
    return launched();
  });
}

int sequence_softmax(Elem t, const void* x, const int64_t* offsets, void* out, int64_t S, Stream s) {
  if (S == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    softmax_kernel<<<blocks_for_warps(S), kThreads, 0, s>>>(static_cast<const T*>(x), offsets, static_cast<T*>(out), S);
    return launched();
  });
}

int sequence_softmax_grad(Elem t, const void* y, const void* dy, const int64_t* offsets, void* dx, int64_t S, Stream s) {
  if (S == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    softmax_grad_kernel<<<blocks_for_warps(S), kThreads, 0, s>>>(static_cast<const T*>(y), static_cast<const T*>(dy), offsets, static_cast<T*>(dx), S);
    return launched();
  });
}

int sequence_expand_grad(Elem t, const void* dout, const int64_t* plan, void* dx, int64_t M, int64_t D, Stream s) {
  if (M * D == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    expand_grad_kernel<<<blocks_for(M * D), kThreads, 0, s>>>(static_cast<const T*>(dout), plan, static_cast<T*>(dx), M, D);
    return launched();
  });
}

}  // namespace oar::cuda_kernels
