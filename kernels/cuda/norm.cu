// kernels/cuda/norm.cu: batch_norm and its gradient with the CPU kernel's semantics (kernels/cpu/batch_norm.hpp):
// the biased batch variance in the running statistics, statistics in double, and the global-statistics
// gradient. cuDNN's batch norm keeps the unbiased variance in its running estimate and has no global-statistics
// backward, so these are written here: the per-channel sums through channel_sum.cuh (many blocks per channel),
// then an element-wise pass.
#include "kernels/cuda/channel_sum.cuh"
#include "kernels/cuda/common.cuh"

namespace oar::cuda_kernels {

namespace {

// The statistics' sums: x - shift and its square, shift being the channel's first element (sums of squares
// about a point of the data do not cancel for a large mean, as about zero they would).
template <class T>
struct StatTerms {
  const T* x;
  int64_t c, s;
  __device__ void operator()(int64_t i, int64_t j, double* acc) const {
    const double d = double(x[i]) - double(x[j * s]);
    acc[0] += d;
    acc[1] += d * d;
  }
};

// From a channel's mean and variance: the factors y = x ka + kb, the running and the saved statistics.
template <class T>
struct StatOutputs {
  const T *x, *scale, *bias, *mean_in, *var_in;
  T *mean_out, *var_out, *saved_mean, *saved_istd, *ka, *kb;
  int64_t m, s;
  double mom, eps;
  bool global;
  __device__ void write(int64_t ch, double mu, double var) const {
    const double istd = 1.0 / sqrt(var + eps);
    ka[ch] = T(double(scale[ch]) * istd);
    kb[ch] = T(double(bias[ch]) - mu * double(scale[ch]) * istd);
    const bool update = !global && m > 0;
    const double rm = double(mean_in[ch]), rv = double(var_in[ch]);
    if (mean_out) mean_out[ch] = T(update ? rm * mom + mu * (1.0 - mom) : rm);
    if (var_out) var_out[ch] = T(update ? rv * mom + var * (1.0 - mom) : rv);
    if (saved_mean) saved_mean[ch] = T(mu);
    if (saved_istd) saved_istd[ch] = T(istd);
  }
  __device__ void operator()(int64_t ch, const double* sum) const {  // the batch's statistics
    const double d = sum[0] / double(m), shift = double(x[ch * s]);
    const double var = sum[1] / double(m) - d * d;
    write(ch, shift + d, var > 0 ? var : 0);
  }
};

// Global statistics, or an empty batch: the running values as they are.
template <class T>
__global__ void bn_stats_given(StatOutputs<T> o, int64_t c) {
  OAR_GRID_STRIDE(ch, c) {
    const bool batch = !o.global;  // an empty batch: mean 0, variance 0, as the CPU kernel
    o.write(ch, batch ? 0.0 : double(o.mean_in[ch]), batch ? 0.0 : double(o.var_in[ch]));
  }
}

template <class T>
__global__ void bn_apply(const T* x, T* y, const T* ka, const T* kb, int64_t total, int64_t c, int64_t s) {
  OAR_GRID_STRIDE(i, total) {
    const int64_t ch = (i / s) % c;
    y[i] = x[i] * ka[ch] + kb[ch];
  }
}

// The gradient's sums: dy and dy xhat.
template <class T>
struct GradTerms {
  const T *x, *dy, *mean, *istd;
  __device__ void operator()(int64_t i, int64_t j, double* acc) const {
    const double g = double(dy[i]);
    acc[0] += g;
    acc[1] += g * (double(x[i]) - double(mean[j])) * double(istd[j]);
  }
};

// The parameter gradients, and the per-channel means of the sums that dx needs (md, mdx).
template <class T>
struct GradOutputs {
  T *dscale, *dbias;
  double* means;  // [c, 2]
  int64_t m;
  __device__ void operator()(int64_t ch, const double* sum) const {
    if (dscale) dscale[ch] = T(sum[1]);
    if (dbias) dbias[ch] = T(sum[0]);
    means[2 * ch] = m ? sum[0] / double(m) : 0;
    means[2 * ch + 1] = m ? sum[1] / double(m) : 0;
  }
};

template <class T>
__global__ void bn_dx(const T* x, const T* dy, const T* scale, const T* mean, const T* istd, const double* means, T* dx, int64_t total, int64_t c,
                      int64_t s, bool global) {
  OAR_GRID_STRIDE(i, total) {
    const int64_t ch = (i / s) % c;
    const double is = double(istd[ch]), k = double(scale[ch]) * is;
    const T kg = T(k);
    // global: x does not enter, so a non-finite x cannot reach dx through 0 * x
    if (global) {
      dx[i] = kg * dy[i];
    } else {
      const T kx = T(-k * is * means[2 * ch + 1]), k0 = T(-k * means[2 * ch]), mt = mean[ch];
      dx[i] = kg * dy[i] + (kx * (x[i] - mt) + k0);
    }
  }
}

}  // namespace

int batch_norm_forward(Elem t, const void* x, void* y, const void* scale, const void* bias, const void* mean_in, const void* var_in, void* mean_out,
                       void* var_out, void* saved_mean, void* saved_istd, void* ka, void* kb, int64_t n, int64_t c, int64_t s, float momentum,
                       double epsilon, bool global, void* scratch, Stream st) {
  if (c == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    const StatOutputs<T> o{static_cast<const T*>(x),       static_cast<const T*>(scale),  static_cast<const T*>(bias), static_cast<const T*>(mean_in),
                           static_cast<const T*>(var_in),  static_cast<T*>(mean_out),     static_cast<T*>(var_out),    static_cast<T*>(saved_mean),
                           static_cast<T*>(saved_istd),    static_cast<T*>(ka),           static_cast<T*>(kb),         n * s,
                           s,                              double(momentum),              epsilon,                     global};
    if (global || n * s == 0) bn_stats_given<<<blocks_for(c), kThreads, 0, st>>>(o, c);
    else channel_sum<2>(n, c, s, scratch, StatTerms<T>{static_cast<const T*>(x), c, s}, o, st);
    if (n * c * s > 0)
      bn_apply<<<blocks_for(n * c * s), kThreads, 0, st>>>(static_cast<const T*>(x), static_cast<T*>(y), static_cast<const T*>(ka),
                                                            static_cast<const T*>(kb), n * c * s, c, s);
    return launched();
  });
}

int batch_norm_backward(Elem t, const void* x, const void* dy, const void* scale, const void* saved_mean, const void* saved_istd, void* dx, void* dscale,
                        void* dbias, int64_t n, int64_t c, int64_t s, bool global, void* scratch, Stream st) {
  if (c == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    const T *px = static_cast<const T*>(x), *pdy = static_cast<const T*>(dy), *pm = static_cast<const T*>(saved_mean),
            *pi = static_cast<const T*>(saved_istd);
    double* means = reinterpret_cast<double*>(static_cast<char*>(scratch) + channel_scratch_bytes(n, c, s, 2));
    channel_sum<2>(n, c, s, scratch, GradTerms<T>{px, pdy, pm, pi}, GradOutputs<T>{static_cast<T*>(dscale), static_cast<T*>(dbias), means, n * s}, st);
    if (dx && n * c * s > 0)
      bn_dx<<<blocks_for(n * c * s), kThreads, 0, st>>>(px, pdy, static_cast<const T*>(scale), pm, pi, means, static_cast<T*>(dx), n * c * s, c, s, global);
    return launched();
  });
}

}  // namespace oar::cuda_kernels

// ---- layer_norm: x as [rows, k], one warp per row for k <= 1024, else one block per row; the row's sums in
// double (the CPU kernel's two passes), then the element-wise pass in T as the CPU writes it. The parameter
// gradients are per-column sums through channel_sum.cuh ([rows, k, 1]: many blocks, a fixed order).

namespace oar::cuda_kernels {

namespace {

inline constexpr int64_t kWarpRowsUpTo = 1024;  // k up to this: a warp per row, else a block

/// Which row a thread works on, and its lane in it: W threads per row (32: a warp; kThreads: the block).
template <int W>
struct Rows {
  static constexpr int per_block = kThreads / W;
  __device__ static int64_t first() { return int64_t(blockIdx.x) * per_block + threadIdx.x / W; }
  __device__ static int64_t step() { return int64_t(gridDim.x) * per_block; }
  __device__ static int lane() { return int(threadIdx.x % W); }
  static unsigned blocks(int64_t rows) {
    const int64_t b = (rows + per_block - 1) / per_block;
    return unsigned(b < 4096 ? b : 4096);
  }
};

/// The sum of v over a row's W threads, the same bits in each: butterfly shuffles in each warp (every step adds
/// the same two values in every lane), then the block's warps in order. Every thread of the row must call it.
template <int W>
__device__ double row_sum(double v, double* warp_sums) {
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  if constexpr (W == 32) {
    return v;
  } else {
    if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = v;
    __syncthreads();
    double s = 0;
    for (int w = 0; w < W / 32; ++w) s += warp_sums[w];
    __syncthreads();  // warp_sums is reused by the next sum
    return s;
  }
}

template <class T>
struct LnArgs {
  const T *x, *scale, *bias, *dy, *mean, *var;
  T *y, *mean_out, *var_out, *dx, *istd;
  int64_t rows, k;
  double eps;
};

template <class T, int W>
__global__ void ln_forward(LnArgs<T> a) {
  using R = Rows<W>;
  __shared__ double warp_sums[kThreads / 32];
  const int64_t k = a.k;
  for (int64_t r = R::first(); r < a.rows; r += R::step()) {
    const T* xr = a.x + r * k;
    T* yr = a.y + r * k;
    double s = 0, q = 0;
    for (int64_t j = R::lane(); j < k; j += W) s += double(xr[j]);
    s = row_sum<W>(s, warp_sums);
    const double mu = k ? s / double(k) : 0;
    for (int64_t j = R::lane(); j < k; j += W) q += (double(xr[j]) - mu) * (double(xr[j]) - mu);
    q = row_sum<W>(q, warp_sums);  // every read of the row is done: y may be x
    const double v = k ? q / double(k) : 0;
    if (R::lane() == 0) {
      a.mean_out[r] = T(mu);
      a.var_out[r] = T(v);
    }
    const T is = T(1.0 / sqrt(v + a.eps)), mt = T(mu);
    for (int64_t j = R::lane(); j < k; j += W) {
      T o = (xr[j] - mt) * is;
      if (a.scale) o = o * a.scale[j];
      if (a.bias) o = o + a.bias[j];
      yr[j] = o;
    }
  }
}

template <class T>
__global__ void ln_istd(LnArgs<T> a) {
  OAR_GRID_STRIDE(r, a.rows) a.istd[r] = T(1.0 / sqrt(double(a.var[r]) + a.eps));
}

template <class T, int W>
__global__ void ln_dx(LnArgs<T> a) {
  using R = Rows<W>;
  __shared__ double warp_sums[kThreads / 32];
  const int64_t k = a.k;
  for (int64_t r = R::first(); r < a.rows; r += R::step()) {
    const T *xr = a.x + r * k, *gr = a.dy + r * k;
    T* dr = a.dx + r * k;
    const T mu = a.mean[r], is = a.istd[r];
    double sg = 0, sgx = 0;  // sum(g), sum(g xhat) with g = dy scale
    for (int64_t j = R::lane(); j < k; j += W) {
      const T g = a.scale ? gr[j] * a.scale[j] : gr[j];
      sg += double(g);
      sgx += double(g) * double((xr[j] - mu) * is);
    }
    sg = row_sum<W>(sg, warp_sums);
    sgx = row_sum<W>(sgx, warp_sums);
    const T mg = T(sg / double(k)), mgx = T(sgx / double(k));
    for (int64_t j = R::lane(); j < k; j += W) {
      const T g = a.scale ? gr[j] * a.scale[j] : gr[j];
      dr[j] = is * (g - mg - (xr[j] - mu) * is * mgx);
    }
  }
}

// The parameter gradients' sums per column j: dy xhat and dy.
template <class T>
struct LnParamTerms {
  const T *x, *dy, *mean, *istd;
  int64_t k;
  __device__ void operator()(int64_t i, int64_t, double* acc) const {
    const int64_t r = i / k;
    const double g = double(dy[i]);
    acc[0] += g * (double(x[i]) - double(mean[r])) * double(istd[r]);
    acc[1] += g;
  }
};

template <class T>
struct LnParamOutputs {
  T *dscale, *dbias;
  __device__ void operator()(int64_t j, const double* sum) const {
    if (dscale) dscale[j] = T(sum[0]);
    if (dbias) dbias[j] = T(sum[1]);
  }
};

}  // namespace

int layer_norm_forward(Elem t, const void* x, const void* scale, const void* bias, void* y, void* mean, void* var, int64_t rows, int64_t k,
                       double epsilon, Stream s) {
  if (rows == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    LnArgs<T> a{};
    a.x = static_cast<const T*>(x), a.scale = static_cast<const T*>(scale), a.bias = static_cast<const T*>(bias);
    a.y = static_cast<T*>(y), a.mean_out = static_cast<T*>(mean), a.var_out = static_cast<T*>(var);
    a.rows = rows, a.k = k, a.eps = epsilon;
    if (k <= kWarpRowsUpTo) ln_forward<T, 32><<<Rows<32>::blocks(rows), kThreads, 0, s>>>(a);
    else ln_forward<T, kThreads><<<Rows<kThreads>::blocks(rows), kThreads, 0, s>>>(a);
    return launched();
  });
}

int layer_norm_backward(Elem t, const void* x, const void* dy, const void* scale, const void* mean, const void* var, void* dx, void* dscale,
                        void* dbias, int64_t rows, int64_t k, double epsilon, void* scratch, Stream s) {
  if (k == 0) return 0;  // nothing to write
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    LnArgs<T> a{};
    a.x = static_cast<const T*>(x), a.dy = static_cast<const T*>(dy), a.scale = static_cast<const T*>(scale);
    a.mean = static_cast<const T*>(mean), a.var = static_cast<const T*>(var);
    a.dx = static_cast<T*>(dx), a.istd = static_cast<T*>(scratch);
    a.rows = rows, a.k = k, a.eps = epsilon;
    if (rows > 0) ln_istd<<<blocks_for(rows), kThreads, 0, s>>>(a);
    if (dx && rows > 0) {
      if (k <= kWarpRowsUpTo) ln_dx<T, 32><<<Rows<32>::blocks(rows), kThreads, 0, s>>>(a);
      else ln_dx<T, kThreads><<<Rows<kThreads>::blocks(rows), kThreads, 0, s>>>(a);
    }
    if (dscale || dbias) {
      void* partial = static_cast<char*>(scratch) + size_t(rows) * sizeof(double);
      channel_sum<2>(rows, k, 1, partial, LnParamTerms<T>{a.x, a.dy, a.mean, a.istd, k}, LnParamOutputs<T>{static_cast<T*>(dscale), static_cast<T*>(dbias)},
                     s);
    }
    return launched();
  });
}

}  // namespace oar::cuda_kernels
