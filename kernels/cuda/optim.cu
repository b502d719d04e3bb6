// kernels/cuda/optim.cu: the parameter updates of kernels/cpu/optimizers.hpp on the device (dense gradients,
// and SelectedRows ones for sgd and adam), the learning rate, the running powers and SkipUpdate read from device
// scalars so that a step never waits for the host.
#include <cub/block/block_reduce.cuh>

#include <cmath>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/optim_launch.hpp"
#include "kernels/update_rules.hpp"

namespace oar::cuda_kernels {

namespace {

// Each rule's update of one element (kernels/update_rules.hpp) on device memory, shared by update_group's kernel
// and the SelectedRows ones.
template <class T>
__device__ void momentum_at(T* p, T* v, const T* g, int64_t i, T l, T mu, bool nesterov) {
  T pv = p[i], vv = v[i];
  fn::momentum_step(pv, vv, g[i], l, mu, nesterov);
  v[i] = vv;
  p[i] = pv;
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
__device__ void adam_at(T* p, T* m, T* v, int64_t i, T gi, T lr_t, T wd, T b1, T b2, T eps, T coeff) {
  T pv = p[i], mv = m[i], vv = v[i];
  fn::adam_step(pv, mv, vv, gi, lr_t, wd, coeff != T(0), b1, b2, eps);
  m[i] = mv;
  v[i] = vv;
  p[i] = pv;
}

/// Whether a SkipUpdate flag (null: none) holds true.
__device__ inline bool skipped(const bool* skip) { return skip && *skip; }

template <class T>
__global__ void scale_scalar_kernel(const T* in, T* out, T beta, const bool* skip) {
  out[0] = skipped(skip) ? in[0] : T(double(in[0]) * double(beta));
}

// adagrad, decayed_adagrad, adamax, rmsprop, adadelta: the same functions the CPU's loops call, one element,
// run by update_group_kernel (one parameter or many per launch); each output is the input it updates (the host
// copied the inputs there).
template <class T>
__device__ void adagrad_at(T* p, T* m, int64_t i, T gi, T l, T e, T d, bool plain) {
  T pv = p[i], mv = m[i];
  fn::adagrad_step(pv, mv, gi, l, e, d, plain);
  m[i] = mv;
  p[i] = pv;
}
template <class T>
__device__ void adamax_at(T* p, T* m, T* u, int64_t i, T gi, T lr_t, T b1, T b2, T e) {
  T pv = p[i], mv = m[i], uv = u[i];
  fn::adamax_step(pv, mv, uv, gi, lr_t, b1, b2, e);
  m[i] = mv;
  u[i] = uv;
  p[i] = pv;
}
template <class T>
__device__ void rmsprop_at(T* p, T* ms, T* mg, T* mom, int64_t i, T gi, T l, T e, T rho, T mu) {
  T pv = p[i], msv = ms[i], momv = mom[i], mgv = mg ? mg[i] : T(0);
  fn::rmsprop_step(pv, msv, mg ? &mgv : nullptr, momv, gi, l, e, rho, mu);
  if (mg) mg[i] = mgv;
  ms[i] = msv;
  mom[i] = momv;
  p[i] = pv;
}
template <class T>
__device__ void adadelta_at(T* p, T* eg, T* edx, int64_t i, T gi, T r, T e) {
  T pv = p[i], egv = eg[i], edxv = edx[i];
  fn::adadelta_step(pv, egv, edxv, gi, r, e);
  eg[i] = egv;
  edx[i] = edxv;
  p[i] = pv;
}

// ---- SelectedRows gradients: one thread per (group, column) of optim_launch.hpp's plan, the group's value rows in order.
struct Plan {
  const int64_t *rows, *start, *src;
  __device__ Plan(const int64_t* plan, int64_t k) : rows(plan), start(plan + k), src(plan + 2 * k + 1) {}
};
template <class T>
__global__ void sparse_sgd_kernel(T* p, const T* value, const int64_t* plan, int64_t k, int64_t w, const T* lr, const bool* skip) {
  if (skipped(skip)) return;
  const Plan pl(plan, k);
  const T l = lr[0];
  OAR_GRID_STRIDE(e, k * w) {
    const int64_t i = e / w, j = e % w;
    T* dst = p + pl.rows[i] * w + j;
    T x = *dst;
    for (int64_t q = pl.start[i]; q < pl.start[i + 1]; ++q) x -= l * value[pl.src[q] * w + j];
    *dst = x;
  }
}
template <class T>
__global__ void sparse_merge_kernel(const T* value, const int64_t* plan, int64_t k, int64_t w, bool compact, T* merged) {
  const Plan pl(plan, k);
  OAR_GRID_STRIDE(e, k * w) {
    const int64_t i = e / w, j = e % w;
    T s = T(0);
    for (int64_t q = pl.start[i]; q < pl.start[i + 1]; ++q) s += value[pl.src[q] * w + j];
    merged[(compact ? i : pl.rows[i]) * w + j] = s;
  }
}
template <class T>
__global__ void sparse_adam_kernel(T* p, T* m, T* v, const T* merged, const int64_t* rows, int64_t k, int64_t w, const T* lr, const T* b1p, const T* b2p,
                                   T b1, T b2, T eps, T coeff, const bool* skip) {
  if (skipped(skip)) return;
  const AdamRates r = adam_rates(lr, b1p, b2p, coeff);
  OAR_GRID_STRIDE(e, k * w) adam_at(p, m, v, rows[e / w] * w + e % w, merged[e], T(r.lr_t), T(r.wd), b1, b2, eps, coeff);
}

// ---- several tensors in one launch: blocks take chunks of the tensors laid end to end
constexpr int64_t kChunk = 4096;
struct UpdateBatch {
  UpdateTensor t[max_update_tensors];
  int64_t first_chunk[max_update_tensors + 1];  // tensor k owns chunks [first_chunk[k], first_chunk[k + 1])
  int count;
};

/// Chunk c of a batch: its tensor k and its elements [lo, hi) there.
struct Chunk {
  int k;
  int64_t lo, hi;
};
__device__ inline Chunk chunk_of(const UpdateBatch& b, int64_t c) {
  int k = 0;
  while (b.first_chunk[k + 1] <= c) ++k;
  const int64_t lo = (c - b.first_chunk[k]) * kChunk;
  return {k, lo, min(b.t[k].n, lo + kChunk)};
}

template <class T>
__global__ void update_group_kernel(UpdateArgs a, UpdateBatch b) {
  for (int64_t c = blockIdx.x; c < b.first_chunk[b.count]; c += gridDim.x) {
    const auto [k, lo, hi] = chunk_of(b, c);
    const UpdateTensor& u = b.t[k];
    if (skipped(u.skip)) continue;
    T* p = static_cast<T*>(u.p);
    const T* g = static_cast<const T*>(u.g);
    const T* lr = static_cast<const T*>(u.lr);
    T* m = static_cast<T*>(u.m);
    T* v = static_cast<T*>(u.v);
    const int64_t first = lo + threadIdx.x;
    switch (a.rule) {
      case UpdateRule::sgd: {
        const T l = lr[0];
        for (int64_t i = first; i < hi; i += blockDim.x) p[i] -= l * g[i];
        break;
      }
      case UpdateRule::momentum: {
        const T l = lr[0], mu = T(a.mu);
        for (int64_t i = first; i < hi; i += blockDim.x) momentum_at(p, m, g, i, l, mu, a.nesterov);
        break;
      }
      case UpdateRule::adam: {
        const T coeff = T(a.coeff);
        const AdamRates r = adam_rates(lr, static_cast<const T*>(u.beta1_pow), static_cast<const T*>(u.beta2_pow), coeff);
        for (int64_t i = first; i < hi; i += blockDim.x) adam_at(p, m, v, i, g[i], T(r.lr_t), T(r.wd), T(a.beta1), T(a.beta2), T(a.epsilon), coeff);
        break;
      }
      case UpdateRule::adagrad: {
        const T l = lr[0];
        for (int64_t i = first; i < hi; i += blockDim.x) adagrad_at(p, m, i, g[i], l, T(a.epsilon), T(a.decay), a.decay < 0);
        break;
      }
      case UpdateRule::adamax: {
        const T lr_t = T(double(lr[0]) / (1 - double(static_cast<const T*>(u.beta1_pow)[0])));
        for (int64_t i = first; i < hi; i += blockDim.x) adamax_at(p, m, v, i, g[i], lr_t, T(a.beta1), T(a.beta2), T(a.epsilon));
        break;
      }
      case UpdateRule::rmsprop: {
        const T l = lr[0];
        for (int64_t i = first; i < hi; i += blockDim.x)
          rmsprop_at(p, m, static_cast<T*>(u.w), v, i, g[i], l, T(a.epsilon), T(a.decay), T(a.mu));
        break;
      }
      case UpdateRule::adadelta:
        for (int64_t i = first; i < hi; i += blockDim.x) adadelta_at(p, m, v, i, g[i], T(a.decay), T(a.epsilon));
        break;
      case UpdateRule::lamb: break;  // its own three kernels (below): its step needs each tensor's norms first
    }
  }
}

template <class T>
__global__ void advance_pows_kernel(UpdateArgs a, UpdateBatch b) {
  const int k = threadIdx.x;
  if (k >= b.count) return;
  const UpdateTensor& u = b.t[k];
  const bool skip = skipped(u.skip);
  auto advance = [&](void* out, const void* in, float beta) {
    if (!out) return;  // not advanced, or no such power (adamax's beta2): `in` may be null too
    const T x = static_cast<const T*>(in)[0];
    static_cast<T*>(out)[0] = skip ? x : T(double(x) * double(T(beta)));
  };
  advance(u.beta1_pow_out, u.beta1_pow, a.beta1);
  advance(u.beta2_pow_out, u.beta2_pow, a.beta2);
}

// lamb over a batch in three launches: (1) per chunk, the moments, the direction r (kept in `r` at the tensor's
// chunk-aligned offset) and the chunk's sums of p^2 and r^2 in double; (2) a block per tensor adding its
// chunks' sums in a fixed order into its step lr * ||p|| / ||r|| (lr alone when either norm is 0); (3) p -= step
// r. Every sum has one order, so a step repeats bit for bit.
template <class T>
__global__ void lamb_direction_kernel(UpdateArgs a, UpdateBatch b, T* r_all, double* partial) {
  using Block = cub::BlockReduce<double, kThreads>;
  __shared__ typename Block::TempStorage tmp;
  const T b1 = T(a.beta1), b2 = T(a.beta2), e = T(a.epsilon), wd = T(a.coeff);
  for (int64_t c = blockIdx.x; c < b.first_chunk[b.count]; c += gridDim.x) {
    const auto [k, lo, hi] = chunk_of(b, c);
    const UpdateTensor& u = b.t[k];
    if (skipped(u.skip)) {  // its moments untouched; its (unused) sums zero
      if (threadIdx.x == 0) partial[2 * c] = partial[2 * c + 1] = 0;
      continue;
    }
    const T* p = static_cast<const T*>(u.p);
    const T* g = static_cast<const T*>(u.g);
    T* m1 = static_cast<T*>(u.m);
    T* m2 = static_cast<T*>(u.v);
    T* r = r_all + b.first_chunk[k] * kChunk;
    const T c1 = T(1 - double(static_cast<const T*>(u.beta1_pow)[0])), c2 = T(1 - double(static_cast<const T*>(u.beta2_pow)[0]));
    double pn = 0, rn = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
      const T pi = p[i];
      T am = m1[i], bm = m2[i];
      const T ri = fn::lamb_direction(pi, am, bm, g[i], b1, b2, c1, c2, e, wd);
      m1[i] = am;
      m2[i] = bm;
      r[i] = ri;
      pn += double(pi) * double(pi);
      rn += double(ri) * double(ri);
    }
    const double ps = Block(tmp).Sum(pn);
    __syncthreads();
    const double rs = Block(tmp).Sum(rn);
    __syncthreads();  // tmp is reused by the next chunk
    if (threadIdx.x == 0) {
      partial[2 * c] = ps;
      partial[2 * c + 1] = rs;
    }
  }
}
template <class T>
__global__ void lamb_step_kernel(UpdateBatch b, const double* partial, double* step) {
  const int k = blockIdx.x;
  double pn = 0, rn = 0;
  for (int64_t c = b.first_chunk[k] + threadIdx.x; c < b.first_chunk[k + 1]; c += blockDim.x) {
    pn += partial[2 * c];
    rn += partial[2 * c + 1];
  }
  using Block = cub::BlockReduce<double, kThreads>;
  __shared__ typename Block::TempStorage tmp;
  const double ps = sqrt(Block(tmp).Sum(pn));
  __syncthreads();
  const double rs = sqrt(Block(tmp).Sum(rn));
  if (threadIdx.x == 0) step[k] = double(static_cast<const T*>(b.t[k].lr)[0]) * (ps > 0 && rs > 0 ? ps / rs : 1.0);
}
template <class T>
__global__ void lamb_update_kernel(UpdateBatch b, const T* r_all, const double* step) {
  for (int64_t c = blockIdx.x; c < b.first_chunk[b.count]; c += gridDim.x) {
    const auto [k, lo, hi] = chunk_of(b, c);
    const UpdateTensor& u = b.t[k];
    if (skipped(u.skip)) continue;
    T* p = static_cast<T*>(u.p);
    const T* r = r_all + b.first_chunk[k] * kChunk;
    const T sk = T(step[k]);
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) p[i] = p[i] - sk * r[i];
  }
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
  const bool piecewise = f.kind == ops::LrKind::piecewise;
  if (piecewise && f.pieces > lr_max_pieces) return int(cudaErrorInvalidValue);
  LrArgs a{f, {}, {}};
  if (!piecewise) a.f.pieces = 0;  // the other kinds ignore boundaries, as on the CPU, however many the attrs hold
  for (int i = 0; i < a.f.pieces; ++i) a.boundaries[i] = f.boundaries[i];
  for (int i = 0; piecewise && i <= f.pieces; ++i) a.values[i] = f.values[i];
  return by_any(step_type, [&](auto z) {
    using S = decltype(z);
    lr_kernel<<<1, 1, 0, s>>>(a, static_cast<const S*>(step), lr);
    return launched();
  });
}

int scale_scalar(Elem t, const void* pow, void* pow_out, float beta, const bool* skip, Stream s) {
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    scale_scalar_kernel<<<1, 1, 0, s>>>(static_cast<const T*>(pow), static_cast<T*>(pow_out), T(beta), skip);
    return launched();
  });
}

int sparse_sgd(Elem t, void* p, const void* value, const int64_t* plan, int64_t k, int64_t width, const void* lr, const bool* skip, Stream s) {
  if (k * width == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    sparse_sgd_kernel<<<blocks_for(k * width), kThreads, 0, s>>>(static_cast<T*>(p), static_cast<const T*>(value), plan, k, width,
                                                                  static_cast<const T*>(lr), skip);
    return launched();
  });
}

int sparse_merge(Elem t, const void* value, const int64_t* plan, int64_t k, int64_t width, bool compact, void* merged, Stream s) {
  if (k * width == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    sparse_merge_kernel<<<blocks_for(k * width), kThreads, 0, s>>>(static_cast<const T*>(value), plan, k, width, compact, static_cast<T*>(merged));
    return launched();
  });
}

int sparse_adam(Elem t, void* p, void* m, void* v, const void* merged, const int64_t* rows, int64_t k, int64_t width, const void* lr,
                const void* beta1_pow, const void* beta2_pow, float beta1, float beta2, float epsilon, float coeff, const bool* skip, Stream s) {
  if (k * width == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    sparse_adam_kernel<<<blocks_for(k * width), kThreads, 0, s>>>(static_cast<T*>(p), static_cast<T*>(m), static_cast<T*>(v),
                                                                   static_cast<const T*>(merged), rows, k, width, static_cast<const T*>(lr),
                                                                   static_cast<const T*>(beta1_pow), static_cast<const T*>(beta2_pow), T(beta1), T(beta2),
                                                                   T(epsilon), T(coeff), skip);
    return launched();
  });
}

namespace {
UpdateBatch batch_of(const UpdateTensor* tensors, int count) {
  UpdateBatch b{};
  b.count = count;
  b.first_chunk[0] = 0;
  for (int k = 0; k < count; ++k) {
    b.t[k] = tensors[k];
    b.first_chunk[k + 1] = b.first_chunk[k] + (tensors[k].n + kChunk - 1) / kChunk;
  }
  return b;
}
}  // namespace

size_t update_group_scratch_bytes(Elem t, const UpdateArgs& a, const UpdateTensor* tensors, int count) {
  if (a.rule != UpdateRule::lamb || count <= 0 || count > max_update_tensors) return 0;
  const int64_t chunks = batch_of(tensors, count).first_chunk[count];
  return (2 * size_t(chunks) + size_t(max_update_tensors)) * sizeof(double) + size_t(chunks * kChunk) * (t == Elem::f64 ? sizeof(double) : sizeof(float));
}

int update_group(Elem t, const UpdateArgs& a, const UpdateTensor* tensors, int count, void* scratch, Stream s) {
  if (count <= 0 || count > max_update_tensors) return count == 0 ? 0 : int(cudaErrorInvalidValue);
  const UpdateBatch b = batch_of(tensors, count);
  const int64_t chunks = b.first_chunk[count];
  const unsigned grid = unsigned(chunks < 4096 ? chunks : 4096);
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    if (a.rule == UpdateRule::lamb) {
      if (!scratch && chunks > 0) return int(cudaErrorInvalidValue);
      double* partial = static_cast<double*>(scratch);  // [2 chunks] | step [max_update_tensors] | r (doubles first: aligned)
      double* step = partial + 2 * chunks;
      T* r = reinterpret_cast<T*>(step + max_update_tensors);
      if (chunks > 0) {
        lamb_direction_kernel<T><<<grid, kThreads, 0, s>>>(a, b, r, partial);
        lamb_step_kernel<T><<<unsigned(count), kThreads, 0, s>>>(b, partial, step);
        lamb_update_kernel<T><<<grid, kThreads, 0, s>>>(b, r, step);
      }
    } else if (chunks > 0) {
      update_group_kernel<T><<<grid, kThreads, 0, s>>>(a, b);
    }
    if (a.rule == UpdateRule::adam || a.rule == UpdateRule::adamax || a.rule == UpdateRule::lamb) advance_pows_kernel<T><<<1, max_update_tensors, 0, s>>>(a, b);
    return launched();
  });
}

}  // namespace oar::cuda_kernels
