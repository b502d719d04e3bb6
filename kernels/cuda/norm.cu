// kernels/cuda/norm.cu: batch_norm and its gradient with the CPU kernel's semantics (kernels/cpu/batch_norm.hpp):
// the biased batch variance in the running statistics, two-pass statistics in double, and the global-statistics
// gradient. cuDNN's batch norm keeps the unbiased variance in its running estimate and has no global-statistics
// backward, so these are written here: one block per channel for the statistics, then an element-wise pass.
#include <cub/block/block_reduce.cuh>

#include "kernels/cuda/common.cuh"

namespace oar::cuda_kernels {

namespace {

using Reduce = cub::BlockReduce<double, kThreads>;

// One block per channel (grid-stride over channels): the statistics, the running and saved outputs, and the
// per-channel factors y = x ka + kb.
template <class T>
__global__ void bn_stats(const T* x, const T* scale, const T* bias, const T* mean_in, const T* var_in, T* mean_out, T* var_out, T* saved_mean,
                         T* saved_istd, T* ka, T* kb, int64_t n, int64_t c, int64_t s, double mom, double eps, bool global) {
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ double mu_s;
  const int64_t m = n * s;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    double mu = 0, var = 0;
    if (global) {
      mu = double(mean_in[ch]);
      var = double(var_in[ch]);
    } else if (m > 0) {
      double acc = 0;
      for (int64_t e = threadIdx.x; e < m; e += blockDim.x) acc += double(x[((e / s) * c + ch) * s + e % s]);
      const double sum = Reduce(tmp).Sum(acc);
      if (threadIdx.x == 0) mu_s = sum / double(m);
      __syncthreads();
      mu = mu_s;
      double q = 0;  // two passes: no cancellation for large means
      for (int64_t e = threadIdx.x; e < m; e += blockDim.x) {
        const double d = double(x[((e / s) * c + ch) * s + e % s]) - mu;
        q += d * d;
      }
      const double qs = Reduce(tmp).Sum(q);
      var = qs / double(m);  // valid in thread 0
    }
    if (threadIdx.x == 0) {
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
    __syncthreads();  // tmp and mu_s are reused by the next channel
  }
}

template <class T>
__global__ void bn_apply(const T* x, T* y, const T* ka, const T* kb, int64_t total, int64_t c, int64_t s) {
  OAR_GRID_STRIDE(i, total) {
    const int64_t ch = (i / s) % c;
    y[i] = x[i] * ka[ch] + kb[ch];
  }
}

// One block per channel: sum(dy) and sum(dy xhat), the parameter gradients, then dx of the channel.
template <class T>
__global__ void bn_backward(const T* x, const T* dy, const T* scale, const T* saved_mean, const T* saved_istd, T* dx, T* dscale, T* dbias, int64_t n,
                            int64_t c, int64_t s, bool global) {
  __shared__ typename Reduce::TempStorage tmp;
  __shared__ double md_s, mdx_s;
  const int64_t m = n * s;
  for (int64_t ch = blockIdx.x; ch < c; ch += gridDim.x) {
    const double mu = double(saved_mean[ch]), is = double(saved_istd[ch]);
    double sd = 0, sdx = 0;
    for (int64_t e = threadIdx.x; e < m; e += blockDim.x) {
      const int64_t idx = ((e / s) * c + ch) * s + e % s;
      const double g = double(dy[idx]);
      sd += g;
      sdx += g * (double(x[idx]) - mu) * is;
    }
    const double sd_all = Reduce(tmp).Sum(sd);
    __syncthreads();
    const double sdx_all = Reduce(tmp).Sum(sdx);
    if (threadIdx.x == 0) {
      if (dscale) dscale[ch] = T(sdx_all);
      if (dbias) dbias[ch] = T(sd_all);
      md_s = m ? sd_all / double(m) : 0;
      mdx_s = m ? sdx_all / double(m) : 0;
    }
    __syncthreads();
    if (dx) {
      const double k = double(scale[ch]) * is;
      const T kg = T(k), kx = T(-k * is * mdx_s), k0 = T(-k * md_s), mt = T(mu);
      for (int64_t e = threadIdx.x; e < m; e += blockDim.x) {
        const int64_t idx = ((e / s) * c + ch) * s + e % s;
        // global: x does not enter, so a non-finite x cannot reach dx through 0 * x
        dx[idx] = global ? kg * dy[idx] : kg * dy[idx] + (kx * (x[idx] - mt) + k0);
      }
    }
    __syncthreads();
  }
}

unsigned channel_blocks(int64_t c) { return unsigned(c < 4096 ? (c > 0 ? c : 1) : 4096); }

}  // namespace

int batch_norm_forward(Elem t, const void* x, void* y, const void* scale, const void* bias, const void* mean_in, const void* var_in, void* mean_out,
                       void* var_out, void* saved_mean, void* saved_istd, void* ka, void* kb, int64_t n, int64_t c, int64_t s, float momentum,
                       double epsilon, bool global, Stream st) {
  if (c == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    bn_stats<<<channel_blocks(c), kThreads, 0, st>>>(static_cast<const T*>(x), static_cast<const T*>(scale), static_cast<const T*>(bias),
                                                      static_cast<const T*>(mean_in), static_cast<const T*>(var_in), static_cast<T*>(mean_out),
                                                      static_cast<T*>(var_out), static_cast<T*>(saved_mean), static_cast<T*>(saved_istd), static_cast<T*>(ka),
                                                      static_cast<T*>(kb), n, c, s, double(momentum), epsilon, global);
    if (n * c * s > 0)
      bn_apply<<<blocks_for(n * c * s), kThreads, 0, st>>>(static_cast<const T*>(x), static_cast<T*>(y), static_cast<const T*>(ka),
                                                            static_cast<const T*>(kb), n * c * s, c, s);
    return launched();
  });
}

int batch_norm_backward(Elem t, const void* x, const void* dy, const void* scale, const void* saved_mean, const void* saved_istd, void* dx, void* dscale,
                        void* dbias, int64_t n, int64_t c, int64_t s, bool global, Stream st) {
  if (c == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    bn_backward<<<channel_blocks(c), kThreads, 0, st>>>(static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<const T*>(scale),
                                                         static_cast<const T*>(saved_mean), static_cast<const T*>(saved_istd), static_cast<T*>(dx),
                                                         static_cast<T*>(dscale), static_cast<T*>(dbias), n, c, s, global);
    return launched();
  });
}

}  // namespace oar::cuda_kernels
