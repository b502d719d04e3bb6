// kernels/cuda/layer_norm.cu: layer_norm and its gradient with the CPU kernel's semantics (kernels/cpu/layer_norm.hpp),
// x as [rows, k]: one warp per row for k <= 1024, else one block per row; the row's sums in
// double (the CPU kernel's two passes), then the element-wise pass in T as the CPU writes it. The parameter
// gradients are per-column sums through channel_sum.cuh ([rows, k, 1]: many blocks, a fixed order).
#include "kernels/cuda/channel_sum.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/layer_norm_launch.hpp"
#include "kernels/layer_norm_math.hpp"

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
    const double mu = fn::layer_norm::row_mean(s, k);
    for (int64_t j = R::lane(); j < k; j += W) q += (double(xr[j]) - mu) * (double(xr[j]) - mu);
    q = row_sum<W>(q, warp_sums);  // every read of the row is done: y may be x
    const double v = fn::layer_norm::row_mean(q, k);
    if (R::lane() == 0) {
      a.mean_out[r] = T(mu);
      a.var_out[r] = T(v);
    }
    const T is = fn::layer_norm::istd<T>(v, a.eps), mt = T(mu);
    for (int64_t j = R::lane(); j < k; j += W) {
      T o = fn::layer_norm::xhat(xr[j], mt, is);
      if (a.scale) o = o * a.scale[j];
      if (a.bias) o = o + a.bias[j];
      yr[j] = o;
    }
  }
}

template <class T>
__global__ void ln_istd(LnArgs<T> a) {
  OAR_GRID_STRIDE(r, a.rows) a.istd[r] = fn::layer_norm::istd<T>(double(a.var[r]), a.eps);
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
      sgx += double(g) * double(fn::layer_norm::xhat(xr[j], mu, is));
    }
    sg = row_sum<W>(sg, warp_sums);
    sgx = row_sum<W>(sgx, warp_sums);
    const T mg = T(sg / double(k)), mgx = T(sgx / double(k));
    for (int64_t j = R::lane(); j < k; j += W) {
      const T g = a.scale ? gr[j] * a.scale[j] : gr[j];
      dr[j] = fn::layer_norm::dx(g, xr[j], mu, is, mg, mgx);
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
