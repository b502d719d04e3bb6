// kernels/cuda/attention.cu: scaled_dot_product_attention and the position ops on a GPU (kernels/cuda/attention_launch.hpp).
// A block per query row: its scores against 128 keys at a time in shared memory, with the CPU kernel's online
// softmax (running maximum and sum, the output rescaled as the maximum grows), so nothing T x T is stored. The
// backward block recomputes its row's weights from the saved log-sum-exp, writes its dQ row and adds to dK and
// dV with atomics. Dropout draws come from fn::CounterRng as on the CPU, so both places drop the same weights.
#include <cmath>

#include "kernels/cuda/attention_launch.hpp"
#include "kernels/cuda/common.cuh"
#include "kernels/random_counter.hpp"

namespace oar::cuda_kernels {

namespace {

constexpr int kAttnThreads = 128;

template <class T>
__device__ T block_max(T v, T* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) scratch[threadIdx.x] = scratch[threadIdx.x] > scratch[threadIdx.x + w] ? scratch[threadIdx.x] : scratch[threadIdx.x + w];
    __syncthreads();
  }
  const T r = scratch[0];
  __syncthreads();
  return r;
}
template <class T>
__device__ T block_sum(T v, T* scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) scratch[threadIdx.x] += scratch[threadIdx.x + w];
    __syncthreads();
  }
  const T r = scratch[0];
  __syncthreads();
  return r;
}

/// The scaled, masked score of query row `qrow` (in shared memory) against key j: -inf when dropped.
template <class T>
__device__ T score(const AttnProblem& p, const AttnShared& sh, const T* qrow, const T* k, const void* mask, int64_t i, int64_t j) {
  const T* kr = k + p.k + j * p.ks;
  T acc = 0;
  for (int64_t e = 0; e < sh.d; ++e) acc += qrow[e] * kr[e];
  acc *= T(sh.scale);
  if (p.mask >= 0) {
    if (sh.mask_bool) {
      if (!static_cast<const bool*>(mask)[p.mask + i * p.tk + j]) return T(-INFINITY);
    } else {
      acc += static_cast<const T*>(mask)[p.mask + i * p.tk + j];
    }
  }
  return acc;
}

template <class T>
__device__ T keep_factor(const AttnProblem& p, const AttnShared& sh, int64_t i, int64_t j) {
  if (sh.dropout <= 0) return T(1);
  fn::CounterRng rng(0);
  rng.key = sh.rng_key;
  return rng.uniform(p.draw0 + uint64_t(i * p.tk + j)) >= sh.dropout ? T(1.0 / (1.0 - sh.dropout)) : T(0);
}

// Shared memory: q row [d], scores [threads], reduction scratch [threads], output accumulator [dv].
template <class T>
__global__ void attention_forward_kernel(const AttnProblem* problems, AttnShared sh, const T* q, const T* k, const T* v, const void* mask, T* o, T* lse) {
  const AttnProblem p = problems[blockIdx.x];
  const int64_t i = blockIdx.y;
  if (i >= p.tq) return;
  extern __shared__ unsigned char smem_raw[];
  T* qrow = reinterpret_cast<T*>(smem_raw);
  T* sc = qrow + sh.d;
  T* red = sc + blockDim.x;
  T* acc = red + blockDim.x;
  for (int64_t e = threadIdx.x; e < sh.d; e += blockDim.x) qrow[e] = q[p.q + i * p.qs + e];
  for (int64_t e = threadIdx.x; e < sh.dv; e += blockDim.x) acc[e] = 0;
  __syncthreads();
  const int64_t lim = sh.causal ? max(int64_t(0), min(p.tk, i + p.tk - p.tq + 1)) : p.tk;
  T m = T(-INFINITY), l = 0;
  for (int64_t j0 = 0; j0 < lim; j0 += blockDim.x) {
    const int64_t j = j0 + threadIdx.x;
    const T s = j < lim ? score(p, sh, qrow, k, mask, i, j) : T(-INFINITY);
    const T mnew = max(m, block_max(s, red));
    if (mnew == T(-INFINITY)) continue;  // every key so far dropped
    const T w = s == T(-INFINITY) ? T(0) : exp(s - mnew);
    const T shrink = m == T(-INFINITY) ? T(0) : exp(m - mnew);
    l = l * shrink + block_sum(w, red);
    m = mnew;
    sc[threadIdx.x] = j < lim ? w * keep_factor<T>(p, sh, i, j) : T(0);
    __syncthreads();
    const int64_t n = min(int64_t(blockDim.x), lim - j0);
    for (int64_t e = threadIdx.x; e < sh.dv; e += blockDim.x) {
      T a = acc[e] * shrink;
      for (int64_t jj = 0; jj < n; ++jj) a += sc[jj] * v[p.v + (j0 + jj) * p.vs + e];
      acc[e] = a;
    }
    __syncthreads();
  }
  for (int64_t e = threadIdx.x; e < sh.dv; e += blockDim.x) o[p.o + i * p.os + e] = l > 0 ? acc[e] / l : T(0);
  if (threadIdx.x == 0) lse[p.lse + i * p.lse_stride] = l > 0 ? m + log(l) : T(-INFINITY);
}

// Shared memory: q row [d], dO row [dv], dS [threads], reduction scratch [threads], dQ accumulator [d].
template <class T>
__global__ void attention_backward_kernel(const AttnProblem* problems, AttnShared sh, const T* q, const T* k, const T* v, const void* mask, const T* o,
                                          const T* dout, const T* lse, T* dq, T* dk, T* dv) {
  const AttnProblem p = problems[blockIdx.x];
  const int64_t i = blockIdx.y;
  if (i >= p.tq) return;
  extern __shared__ unsigned char smem_raw[];
  T* qrow = reinterpret_cast<T*>(smem_raw);
  T* drow = qrow + sh.d;
  T* ds = drow + sh.dv;
  T* red = ds + blockDim.x;
  T* dqa = red + blockDim.x;
  T part = 0;
  for (int64_t e = threadIdx.x; e < sh.d; e += blockDim.x) qrow[e] = q[p.q + i * p.qs + e], dqa[e] = 0;
  for (int64_t e = threadIdx.x; e < sh.dv; e += blockDim.x) {
    drow[e] = dout[p.o + i * p.os + e];
    part += drow[e] * o[p.o + i * p.os + e];
  }
  const T delta = block_sum(part, red);  // dO . O
  const T lrow = lse[p.lse + i * p.lse_stride];
  const int64_t lim = lrow == T(-INFINITY) ? 0 : sh.causal ? max(int64_t(0), min(p.tk, i + p.tk - p.tq + 1)) : p.tk;
  for (int64_t j0 = 0; j0 < lim; j0 += blockDim.x) {
    const int64_t j = j0 + threadIdx.x;
    T g = 0;
    if (j < lim) {
      const T s = score(p, sh, qrow, k, mask, i, j);
      const T w = s == T(-INFINITY) ? T(0) : exp(s - lrow);
      const T z = keep_factor<T>(p, sh, i, j);
      const T* vr = v + p.v + j * p.vs;
      T dp = 0;
      for (int64_t e = 0; e < sh.dv; ++e) dp += drow[e] * vr[e];
      g = w * (dp * z - delta) * T(sh.scale);
      T* dvr = dv + p.v + j * p.vs;
      for (int64_t e = 0; e < sh.dv; ++e) atomicAdd(dvr + e, w * z * drow[e]);
      T* dkr = dk + p.k + j * p.ks;
      for (int64_t e = 0; e < sh.d; ++e) atomicAdd(dkr + e, g * qrow[e]);
    }
    ds[threadIdx.x] = g;
    __syncthreads();
    const int64_t n = min(int64_t(blockDim.x), lim - j0);
    for (int64_t e = threadIdx.x; e < sh.d; e += blockDim.x) {
      T a = dqa[e];
      for (int64_t jj = 0; jj < n; ++jj) a += ds[jj] * k[p.k + (j0 + jj) * p.ks + e];
      dqa[e] = a;
    }
    __syncthreads();
  }
  for (int64_t e = threadIdx.x; e < sh.d; e += blockDim.x) dq[p.q + i * p.qs + e] = dqa[e];
}

template <class T>
__global__ void position_encoding_kernel(const T* x, T* out, const int64_t* pos, int64_t rows, int64_t width, float alpha, float beta) {
  const int64_t half = width / 2;
  OAR_GRID_STRIDE(idx, rows * half) {
    const int64_t r = idx / half, kk = idx % half;
    const double w = double(pos[r]) * pow(10000.0, -double(kk) / double(half));
    out[r * width + kk] = T(alpha) * x[r * width + kk] + T(beta) * T(sin(w));
    out[r * width + half + kk] = T(alpha) * x[r * width + half + kk] + T(beta) * T(cos(w));
  }
}

template <class T>
__global__ void scale_kernel(const T* x, T* out, int64_t n, float alpha) {
  OAR_GRID_STRIDE(i, n) out[i] = T(alpha) * x[i];
}

template <class T>
__global__ void rotary_kernel(const T* x, T* out, const int64_t* pos, int64_t rows, int64_t heads, int64_t d, float base, int64_t offset, float sign) {
  const int64_t pairs = d / 2;
  OAR_GRID_STRIDE(idx, rows * heads * pairs) {
    const int64_t r = idx / (heads * pairs), pi = idx % pairs;
    const int64_t at = (idx / pairs) * d + 2 * pi;
    const double a = double(pos[r] + offset) * pow(double(base), -2.0 * double(pi) / double(d));
    const T cs = T(cos(a)), sn = T(double(sign) * sin(a));
    const T u = x[at], w = x[at + 1];
    out[at] = u * cs - w * sn;
    out[at + 1] = u * sn + w * cs;
  }
}

}  // namespace

int attention_forward(Elem t, const AttnProblem* problems, int64_t count, int64_t max_tq, const AttnShared& sh, const void* q, const void* k,
                      const void* v, const void* mask, void* o, void* lse, Stream s) {
  if (count == 0 || max_tq == 0) return 0;
  return by_float(t, [&](auto tag) {
    using T = decltype(tag);
    const size_t smem = size_t(sh.d + 2 * kAttnThreads + sh.dv) * sizeof(T);
    attention_forward_kernel<T><<<dim3(unsigned(count), unsigned(max_tq)), kAttnThreads, smem, s>>>(
        problems, sh, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), mask, static_cast<T*>(o), static_cast<T*>(lse));
    return launched();
  });
}

int attention_backward(Elem t, const AttnProblem* problems, int64_t count, int64_t max_tq, const AttnShared& sh, const void* q, const void* k,
                       const void* v, const void* mask, const void* o, const void* dout, const void* lse, void* dq, void* dk, void* dv, Stream s) {
  if (count == 0 || max_tq == 0) return 0;
  return by_float(t, [&](auto tag) {
    using T = decltype(tag);
    const size_t smem = size_t(2 * sh.d + sh.dv + 2 * kAttnThreads) * sizeof(T);
    attention_backward_kernel<T><<<dim3(unsigned(count), unsigned(max_tq)), kAttnThreads, smem, s>>>(
        problems, sh, static_cast<const T*>(q), static_cast<const T*>(k), static_cast<const T*>(v), mask, static_cast<const T*>(o),
        static_cast<const T*>(dout), static_cast<const T*>(lse), static_cast<T*>(dq), static_cast<T*>(dk), static_cast<T*>(dv));
    return launched();
  });
}

int add_position_encoding(Elem t, const void* x, void* out, const int64_t* pos, int64_t rows, int64_t width, float alpha, float beta, Stream s) {
  return by_float(t, [&](auto tag) {
    using T = decltype(tag);
    position_encoding_kernel<T><<<blocks_for(rows * (width / 2)), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out), pos, rows, width, alpha, beta);
    return launched();
  });
}

int scale_by(Elem t, const void* x, void* out, int64_t n, float alpha, Stream s) {
  return by_float(t, [&](auto tag) {
    using T = decltype(tag);
    scale_kernel<T><<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out), n, alpha);
    return launched();
  });
}

int rotary(Elem t, const void* x, void* out, const int64_t* pos, int64_t rows, int64_t heads, int64_t d, float base, int64_t offset, float sign, Stream s) {
  return by_float(t, [&](auto tag) {
    using T = decltype(tag);
    rotary_kernel<T><<<blocks_for(rows * heads * (d / 2)), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out), pos, rows, heads, d, base, offset,
                                                                             sign);
    return launched();
  });
}

}  // namespace oar::cuda_kernels
