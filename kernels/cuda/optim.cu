// kernels/cuda/optim.cu: the parameter updates of kernels/cpu/optimizers.hpp on the device, the learning rate
// and Adam's running powers read from device scalars so that a step never waits for the host.
#include <cmath>

#include "kernels/cuda/common.cuh"

namespace oar::cuda_kernels {

namespace {

// Each rule's update of one element, shared by the one-parameter kernels and update_group's.
template <class T>
__device__ void momentum_at(T* p, T* v, const T* g, int64_t i, T l, T mu, bool nesterov) {
  const T gi = g[i], vn = mu * v[i] + gi;
  v[i] = vn;
  p[i] = nesterov ? p[i] - (gi + mu * vn) * l : p[i] - l * vn;
}
/// Adam's factors from the device scalars: the bias-corrected rate and (adamw) the decay's.
struct AdamRates {
  double lr_t, wd;
};
template <class T>
__device__ AdamRates adam_rates(const T* lr, const T* b1p, const T* b2p, T coeff) {
  const double l = double(lr[0]);
  return {l * sqrt(1 - double(b2p[0])) / (1 - double(b1p[0])), l * double(coeff)};
}
template <class T>
__device__ void adam_at(T* p, T* m, T* v, const T* g, int64_t i, T lr_t, T wd, T b1, T b2, T eps, T coeff) {
  T pv = p[i];
  if (coeff != T(0)) pv -= wd * pv;
  const T gi = g[i];
  const T a = b1 * m[i] + (T(1) - b1) * gi;
  const T b = b2 * v[i] + (T(1) - b2) * gi * gi;
  m[i] = a;
  v[i] = b;
  p[i] = pv - lr_t * a / (sqrt(b) + eps);
}

template <class T>
__global__ void sgd_kernel(T* p, const T* g, const T* lr, int64_t n) {
  const T l = lr[0];
  OAR_GRID_STRIDE(i, n) p[i] -= l * g[i];
}
template <class T>
__global__ void momentum_kernel(T* p, T* v, const T* g, const T* lr, T mu, bool nesterov, int64_t n) {
  const T l = lr[0];
  OAR_GRID_STRIDE(i, n) momentum_at(p, v, g, i, l, mu, nesterov);
}
template <class T>
__global__ void adam_kernel(T* p, T* m, T* v, const T* g, const T* lr, const T* b1p, const T* b2p, T b1, T b2, T eps, T coeff, int64_t n) {
  const AdamRates r = adam_rates(lr, b1p, b2p, coeff);
  OAR_GRID_STRIDE(i, n) adam_at(p, m, v, g, i, T(r.lr_t), T(r.wd), b1, b2, eps, coeff);
}
template <class T>
__global__ void scale_scalar_kernel(const T* in, T* out, T beta) {
  out[0] = T(double(in[0]) * double(beta));
}

// ---- several tensors in one launch: blocks take chunks of the tensors laid end to end
constexpr int64_t kChunk = 4096;
struct UpdateBatch {
  UpdateTensor t[max_update_tensors];
  int64_t first_chunk[max_update_tensors + 1];  // tensor k owns chunks [first_chunk[k], first_chunk[k + 1])
  int count;
};

template <class T>
__global__ void update_group_kernel(UpdateArgs a, UpdateBatch b) {
  for (int64_t c = blockIdx.x; c < b.first_chunk[b.count]; c += gridDim.x) {
    int k = 0;
    while (b.first_chunk[k + 1] <= c) ++k;
    const UpdateTensor& u = b.t[k];
    const int64_t lo = (c - b.first_chunk[k]) * kChunk, hi = min(u.n, lo + kChunk);
    T* p = static_cast<T*>(u.p);
    const T* g = static_cast<const T*>(u.g);
    const T* lr = static_cast<const T*>(u.lr);
    if (a.rule == UpdateRule::sgd) {
      const T l = lr[0];
      for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) p[i] -= l * g[i];
    } else if (a.rule == UpdateRule::momentum) {
      const T l = lr[0], mu = T(a.mu);
      for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) momentum_at(p, static_cast<T*>(u.m), g, i, l, mu, a.nesterov);
    } else {
      const T coeff = T(a.coeff);
      const AdamRates r = adam_rates(lr, static_cast<const T*>(u.beta1_pow), static_cast<const T*>(u.beta2_pow), coeff);
      for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
        adam_at(p, static_cast<T*>(u.m), static_cast<T*>(u.v), g, i, T(r.lr_t), T(r.wd), T(a.beta1), T(a.beta2), T(a.epsilon), coeff);
    }
  }
}

template <class T>
__global__ void advance_pows_kernel(UpdateArgs a, UpdateBatch b) {
  const int k = threadIdx.x;
  if (k >= b.count) return;
  const UpdateTensor& u = b.t[k];
  if (u.beta1_pow_out) static_cast<T*>(u.beta1_pow_out)[0] = T(double(static_cast<const T*>(u.beta1_pow)[0]) * double(T(a.beta1)));
  if (u.beta2_pow_out) static_cast<T*>(u.beta2_pow_out)[0] = T(double(static_cast<const T*>(u.beta2_pow)[0]) * double(T(a.beta2)));
}

struct LrArgs {
  ops::LrFormula f;
  float boundaries[lr_max_pieces];
  float values[lr_max_pieces + 1];
};
template <class S>
__global__ void lr_kernel(LrArgs a, const S* step, float* lr) {
  ops::LrFormula f = a.f;
  f.boundaries = a.boundaries;
  f.values = a.values;
  lr[0] = float(f.at(double(step[0])));
}

}  // namespace

int lr_schedule(const ops::LrFormula& f, Elem step_type, const void* step, float* lr, Stream s) {
  if (f.pieces > lr_max_pieces) return int(cudaErrorInvalidValue);
  LrArgs a{f, {}, {}};
  for (int i = 0; i < f.pieces; ++i) a.boundaries[i] = f.boundaries[i];
  for (int i = 0; f.kind == ops::LrKind::piecewise && i <= f.pieces; ++i) a.values[i] = f.values[i];
  return by_any(step_type, [&](auto z) {
    using S = decltype(z);
    lr_kernel<<<1, 1, 0, s>>>(a, static_cast<const S*>(step), lr);
    return launched();
  });
}

int sgd(Elem t, void* p, const void* g, const void* lr, int64_t n, Stream s) {
  if (n == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    sgd_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(p), static_cast<const T*>(g), static_cast<const T*>(lr), n);
    return launched();
  });
}

int momentum(Elem t, void* p, void* v, const void* g, const void* lr, float mu, bool nesterov, int64_t n, Stream s) {
  if (n == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    momentum_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(p), static_cast<T*>(v), static_cast<const T*>(g), static_cast<const T*>(lr), T(mu),
                                                        nesterov, n);
    return launched();
  });
}

int adam(Elem t, void* p, void* m, void* v, const void* g, const void* lr, const void* beta1_pow, const void* beta2_pow, float beta1, float beta2,
         float epsilon, float coeff, int64_t n, Stream s) {
  if (n == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    adam_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<T*>(p), static_cast<T*>(m), static_cast<T*>(v), static_cast<const T*>(g),
                                                    static_cast<const T*>(lr), static_cast<const T*>(beta1_pow), static_cast<const T*>(beta2_pow), T(beta1),
                                                    T(beta2), T(epsilon), T(coeff), n);
    return launched();
  });
}

int scale_scalar(Elem t, const void* pow, void* pow_out, float beta, Stream s) {
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    scale_scalar_kernel<<<1, 1, 0, s>>>(static_cast<const T*>(pow), static_cast<T*>(pow_out), T(beta));
    return launched();
  });
}

int update_group(Elem t, const UpdateArgs& a, const UpdateTensor* tensors, int count, Stream s) {
  if (count <= 0 || count > max_update_tensors) return count == 0 ? 0 : int(cudaErrorInvalidValue);
  UpdateBatch b{};
  b.count = count;
  b.first_chunk[0] = 0;
  for (int k = 0; k < count; ++k) {
    b.t[k] = tensors[k];
    b.first_chunk[k + 1] = b.first_chunk[k] + (tensors[k].n + kChunk - 1) / kChunk;
  }
  const int64_t chunks = b.first_chunk[count];
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    if (chunks > 0) update_group_kernel<T><<<unsigned(chunks < 4096 ? chunks : 4096), kThreads, 0, s>>>(a, b);
    if (a.rule == UpdateRule::adam) advance_pows_kernel<T><<<1, max_update_tensors, 0, s>>>(a, b);
    return launched();
  });
}

}  // namespace oar::cuda_kernels
