// kernels/cuda/nn.cu: the loss and metric kernels (cross_entropy, softmax_with_cross_entropy and their gradients,
// top_k, accuracy) and dropout's mask.
#include <cub/block/block_reduce.cuh>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/nn_launch.hpp"
#include "kernels/random_counter.hpp"

namespace oar::cuda_kernels {

namespace {

// -log(x), with +-inf taken as +-1e20 as the CPU kernel does (a probability of 0 at the label).
template <class T>
__device__ T tolerable_neg_log(T x) {
  T v = -log(x);
  if (isinf(v)) return v > T(0) ? T(1e20) : T(-1e20);
  return v;
}

template <class T>
__global__ void cross_entropy_hard(const T* x, const int64_t* label, T* out, int64_t rows, int64_t cols, int64_t ignore) {
  OAR_GRID_STRIDE(r, rows) {
    const int64_t l = label[r];
    if (l == ignore) out[r] = T(0);
    else if (l < 0 || l >= cols) out[r] = T(NAN);
    else out[r] = tolerable_neg_log(x[r * cols + l]);
  }
}
// One block per row (grid-stride over rows).
template <class T>
__global__ void cross_entropy_soft(const T* x, const T* label, T* out, int64_t rows, int64_t cols) {
  using Reduce = cub::BlockReduce<T, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    T acc = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) acc += label[r * cols + j] * tolerable_neg_log(x[r * cols + j]);
    const T sum = Reduce(tmp).Sum(acc);
    if (threadIdx.x == 0) out[r] = sum;
    __syncthreads();
  }
}
template <class T>
__global__ void cross_entropy_grad_hard(const T* x, const int64_t* label, const T* dout, T* dx, int64_t rows, int64_t cols, int64_t ignore) {
  OAR_GRID_STRIDE(e, rows * cols) {
    const int64_t r = e / cols, j = e % cols, l = label[r];
    dx[e] = (l != ignore && j == l) ? -dout[r] / x[e] : T(0);
  }
}
template <class T>
__global__ void cross_entropy_grad_soft(const T* x, const T* label, const T* dout, T* dx, int64_t rows, int64_t cols) {
  OAR_GRID_STRIDE(e, rows * cols) dx[e] = -label[e] * dout[e / cols] / x[e];
}

template <class T>
__device__ bool is_nan_value(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}
// Whether (va, a) comes before (vb, b) largest first: NaN first, then larger values, equal ones by index.
template <class T>
__device__ bool before_desc(T va, int64_t a, T vb, int64_t b) {
  const bool na = is_nan_value(va), nb = is_nan_value(vb);
  if (na || nb) return na && nb ? a < b : na;
  return va != vb ? va > vb : a < b;
}
// One thread per row; pass q picks the first element in order after the one pass q - 1 picked.
template <class T>
__global__ void top_k_kernel(const T* x, T* out, int64_t* indices, int64_t rows, int64_t cols, int64_t k) {
  OAR_GRID_STRIDE(r, rows) {
    const T* p = x + r * cols;
    int64_t prev = -1;
    for (int64_t q = 0; q < k; ++q) {
      int64_t best = -1;
      for (int64_t j = 0; j < cols; ++j) {
        if (prev >= 0 && !before_desc(p[prev], prev, p[j], j)) continue;  // j is not after the previous pick
        if (best < 0 || before_desc(p[j], j, p[best], best)) best = j;
      }
      out[r * k + q] = p[best];
      indices[r * k + q] = best;
      prev = best;
    }
  }
}
template <class T>
__global__ void arg_reduce_kernel(const T* x, int64_t* out, int64_t outer, int64_t n, int64_t inner, bool max) {
  OAR_GRID_STRIDE(r, outer * inner) {
    const T* p = x + (r / inner) * n * inner + r % inner;
    int64_t best = 0;
    for (int64_t j = 1; j < n; ++j) {
      const T v = p[j * inner], b = p[best * inner];
      const bool better = max ? before_desc(v, j, b, best) : (is_nan_value(v) ? !is_nan_value(b) : (!is_nan_value(b) && v < b));
      if (better) best = j;
    }
    out[r] = best;
  }
}
template <class L>
__global__ void accuracy_kernel(const int64_t* indices, const L* label, int64_t rows, int64_t k, float* accuracy, int32_t* correct, int32_t* total) {
  using Reduce = cub::BlockReduce<int64_t, 1024>;
  __shared__ typename Reduce::TempStorage tmp;
  int64_t hits = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x)
    for (int64_t j = 0; j < k; ++j)
      if (indices[r * k + j] == int64_t(label[r])) {
        ++hits;
        break;
      }
  const int64_t sum = Reduce(tmp).Sum(hits);
  if (threadIdx.x == 0) {
    accuracy[0] = rows ? float(sum) / float(rows) : 0.f;
    correct[0] = int32_t(sum);
    total[0] = int32_t(rows);
  }
}

// One block per row: the row's max, log-sum-exp, softmax and loss; sums in double.
template <class T>
__global__ void softmax_ce_kernel(const T* x, const void* label, bool soft, T* sm, T* loss, int64_t rows, int64_t cols, int64_t ignore) {
  using Reduce = cub::BlockReduce<double, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ double max_s, lse_s;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    double m = -INFINITY;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) m = fmax(m, double(xr[j]));
    const double mall = Reduce(tmp).Reduce(m, [](double a, double b) { return fmax(a, b); });
    if (threadIdx.x == 0) max_s = mall;
    __syncthreads();
    double e = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) e += exp(double(xr[j]) - max_s);
    const double sum = Reduce(tmp).Sum(e);
    if (threadIdx.x == 0) lse_s = log(sum);
    __syncthreads();
    double l = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const double z = double(xr[j]) - max_s;
      sm[r * cols + j] = T(exp(z - lse_s));
      if (soft) l += double(static_cast<const T*>(label)[r * cols + j]) * (lse_s - z);
    }
    if (soft) {
      const double ls = Reduce(tmp).Sum(l);
      if (threadIdx.x == 0) loss[r] = T(ls);
    } else if (threadIdx.x == 0) {
      const int64_t lb = static_cast<const int64_t*>(label)[r];
      loss[r] = lb == ignore ? T(0) : (lb < 0 || lb >= cols ? T(NAN) : T(lse_s - (double(xr[lb]) - max_s)));
    }
    __syncthreads();
  }
}
template <class T>
__global__ void softmax_ce_grad_hard(const T* sm, const int64_t* label, const T* dloss, T* dx, int64_t rows, int64_t cols, int64_t ignore) {
  OAR_GRID_STRIDE(e, rows * cols) {
    const int64_t r = e / cols, j = e % cols, l = label[r];
    dx[e] = l == ignore ? T(0) : (sm[e] - (j == l ? T(1) : T(0))) * dloss[r];
  }
}
// One block per row: sum(label), then dx.
template <class T>
__global__ void softmax_ce_grad_soft(const T* sm, const T* label, const T* dloss, T* dx, int64_t rows, int64_t cols) {
  using Reduce = cub::BlockReduce<double, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ double sl_s;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    double acc = 0;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) acc += double(label[r * cols + j]);
    const double sl = Reduce(tmp).Sum(acc);
    if (threadIdx.x == 0) sl_s = sl;
    __syncthreads();
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {
      const int64_t e = r * cols + j;
      dx[e] = (sm[e] * T(sl_s) - label[e]) * dloss[r];
    }
    __syncthreads();
  }
}

template <class T>
__global__ void dropout_kernel(const T* x, T* out, T* mask, int64_t n, uint64_t seed, double p, T scale) {
  const fn::CounterRng rng(seed);
  OAR_GRID_STRIDE(i, n) {
    const T keep = rng.uniform(uint64_t(i)) < p ? T(0) : T(1);
    if (mask) mask[i] = keep;
    out[i] = x[i] * keep * scale;
  }
}

template <class T>
__global__ void lookup_kernel(const T* w, const int64_t* ids, T* out, int64_t n, int64_t d, int64_t v, int64_t pad) {
  OAR_GRID_STRIDE(e, n * d) {
    const int64_t id = ids[e / d];
    out[e] = id == pad ? T(0) : (id < 0 || id >= v ? T(NAN) : w[id * d + e % d]);
  }
}
template <class T>
__global__ void lookup_grad_kernel(const int64_t* ids, const T* dout, T* dw, int64_t n, int64_t d, int64_t v, int64_t pad) {
  OAR_GRID_STRIDE(j, d) {
    for (int64_t r = 0; r < v; ++r) dw[r * d + j] = T(0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t id = ids[i];
      if (id != pad && id >= 0 && id < v) dw[id * d + j] += dout[i * d + j];
    }
  }
}

unsigned row_blocks(int64_t rows) { return unsigned(rows < 4096 ? (rows > 0 ? rows : 1) : 4096); }

}  // namespace

int cross_entropy(Elem t, bool soft, const void* x, const void* label, void* out, int64_t rows, int64_t cols, int64_t ignore_index, Stream s) {
  if (rows == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    if (soft)
      cross_entropy_soft<<<row_blocks(rows), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(label), static_cast<T*>(out), rows, cols);
    else
      cross_entropy_hard<<<blocks_for(rows), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const int64_t*>(label), static_cast<T*>(out), rows,
                                                                cols, ignore_index);
    return launched();
  });
}

int cross_entropy_grad(Elem t, bool soft, const void* x, const void* label, const void* dout, void* dx, int64_t rows, int64_t cols,
                       int64_t ignore_index, Stream s) {
  if (rows * cols == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    const T *px = static_cast<const T*>(x), *pd = static_cast<const T*>(dout);
    if (soft)
      cross_entropy_grad_soft<<<blocks_for(rows * cols), kThreads, 0, s>>>(px, static_cast<const T*>(label), pd, static_cast<T*>(dx), rows, cols);
    else
      cross_entropy_grad_hard<<<blocks_for(rows * cols), kThreads, 0, s>>>(px, static_cast<const int64_t*>(label), pd, static_cast<T*>(dx), rows, cols,
                                                                            ignore_index);
    return launched();
  });
}

int softmax_cross_entropy(Elem t, bool soft, const void* x, const void* label, void* sm, void* loss, int64_t rows, int64_t cols, int64_t ignore_index,
                          Stream s) {
  if (rows == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    softmax_ce_kernel<<<row_blocks(rows), kThreads, 0, s>>>(static_cast<const T*>(x), label, soft, static_cast<T*>(sm), static_cast<T*>(loss), rows, cols,
                                                             ignore_index);
    return launched();
  });
}

int softmax_cross_entropy_grad(Elem t, bool soft, const void* sm, const void* label, const void* dloss, void* dx, int64_t rows, int64_t cols,
                               int64_t ignore_index, Stream s) {
  if (rows * cols == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    const T *ps = static_cast<const T*>(sm), *pd = static_cast<const T*>(dloss);
    if (soft)
      softmax_ce_grad_soft<<<row_blocks(rows), kThreads, 0, s>>>(ps, static_cast<const T*>(label), pd, static_cast<T*>(dx), rows, cols);
    else
      softmax_ce_grad_hard<<<blocks_for(rows * cols), kThreads, 0, s>>>(ps, static_cast<const int64_t*>(label), pd, static_cast<T*>(dx), rows, cols,
                                                                         ignore_index);
    return launched();
  });
}

int dropout(Elem t, const void* x, void* out, void* mask, int64_t n, uint64_t seed, double p, double scale, Stream s) {
  if (n == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    dropout_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out), static_cast<T*>(mask), n, seed, p, T(scale));
    return launched();
  });
}

int top_k(Elem t, const void* x, void* out, int64_t* indices, int64_t rows, int64_t cols, int64_t k, Stream s) {
  if (rows == 0 || k == 0) return 0;
  return by_any(t, [&](auto z) {
    using T = decltype(z);
    top_k_kernel<<<blocks_for(rows), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out), indices, rows, cols, k);
    return launched();
  });
}

int lookup_rows(Elem t, const void* w, const int64_t* ids, void* out, int64_t n, int64_t d, int64_t v, int64_t pad, Stream s) {
  if (n * d == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    lookup_kernel<<<blocks_for(n * d), kThreads, 0, s>>>(static_cast<const T*>(w), ids, static_cast<T*>(out), n, d, v, pad);
    return launched();
  });
}

int lookup_rows_grad(Elem t, const int64_t* ids, const void* dout, void* dw, int64_t n, int64_t d, int64_t v, int64_t pad, Stream s) {
  if (d == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    lookup_grad_kernel<<<blocks_for(d), kThreads, 0, s>>>(ids, static_cast<const T*>(dout), static_cast<T*>(dw), n, d, v, pad);
    return launched();
  });
}

int arg_reduce(Elem t, bool max, const void* x, int64_t* out, int64_t outer, int64_t n, int64_t inner, Stream s) {
  if (outer * inner == 0) return 0;
  return by_any(t, [&](auto z) {
    using T = decltype(z);
    arg_reduce_kernel<<<blocks_for(outer * inner), kThreads, 0, s>>>(static_cast<const T*>(x), out, outer, n, inner, max);
    return launched();
  });
}

int accuracy(const int64_t* indices, const void* label, bool label_i32, int64_t rows, int64_t k, float* accuracy, int32_t* correct, int32_t* total,
             Stream s) {
  if (label_i32) accuracy_kernel<<<1, 1024, 0, s>>>(indices, static_cast<const int32_t*>(label), rows, k, accuracy, correct, total);
  else accuracy_kernel<<<1, 1024, 0, s>>>(indices, static_cast<const int64_t*>(label), rows, k, accuracy, correct, total);
  return launched();
}

}  // namespace oar::cuda_kernels
