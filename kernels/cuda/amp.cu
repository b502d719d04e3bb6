// kernels/cuda/amp.cu: dynamic loss scaling's kernels (kernels/cuda/amp_launch.hpp) and logical_not.
#include "kernels/cuda/amp_launch.hpp"
#include "kernels/cuda/common.cuh"
#include "kernels/loss_scale.hpp"

namespace oar::cuda_kernels {

namespace {

template <class T>
__global__ void unscale_kernel(const T* x, T* out, int64_t n, const float* scale, bool* found) {
  const T k = T(1.f / *scale);  // the CPU kernel's factor: the reciprocal in f32, then widened
  bool bad = false;
  OAR_GRID_STRIDE(i, n) {
    const T v = x[i];
    bad = bad || !isfinite(v);
    out[i] = v * k;
  }
  if (bad) *found = true;  // every writer stores the same value: no atomic needed
}

__global__ void loss_scaling_kernel(const bool* found, const float* prev, const int32_t* good_in, const int32_t* bad_in, float* scale, int32_t* good,
                                    int32_t* bad, int32_t incr_every, int32_t decr_every, float incr_ratio, float decr_ratio) {
  float s = *prev;
  int32_t g = *good_in, b = *bad_in;
  fn::next_loss_scale(*found, s, g, b, incr_every, decr_every, incr_ratio, decr_ratio);
  *scale = s, *good = g, *bad = b;
}

__global__ void not_kernel(const bool* x, bool* out, int64_t n) {
  OAR_GRID_STRIDE(i, n) out[i] = !x[i];
}

}  // namespace

int unscale_and_check(Elem t, const void* x, void* out, int64_t n, const float* scale, bool* found, Stream s) {
  if (n == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    unscale_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out), n, scale, found);
    return launched();
  });
}

int update_loss_scaling(const bool* found, const float* prev, const int32_t* good_in, const int32_t* bad_in, float* scale, int32_t* good, int32_t* bad,
                        int32_t incr_every, int32_t decr_every, float incr_ratio, float decr_ratio, Stream s) {
  loss_scaling_kernel<<<1, 1, 0, s>>>(found, prev, good_in, bad_in, scale, good, bad, incr_every, decr_every, incr_ratio, decr_ratio);
  return launched();
}

int logical_not(const bool* x, bool* out, int64_t n, Stream s) {
  if (n == 0) return 0;
  not_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, out, n);
  return launched();
}

}  // namespace oar::cuda_kernels
