// kernels/cuda/batch_norm.cu: batch_norm and its gradient with the CPU kernel's semantics (kernels/cpu/batch_norm.hpp):
// the biased batch variance in the running statistics, statistics in double, and the global-statistics
// gradient. cuDNN's batch norm keeps the unbiased variance in its running estimate and has no global-statistics
// backward, so these are written here: the per-channel sums through channel_sum.cuh (many blocks per channel),
// then an element-wise pass.
#include "kernels/cuda/batch_norm_launch.hpp"
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
