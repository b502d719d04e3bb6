// kernels/cuda/clip_norm.cu: squared_l2_norm and its gradient, clip_by_norm and sign, with the CPU kernels'
// semantics (kernels/cpu/{squared_l2_norm,clip_by_norm,sign}.hpp): what gradient clipping by norm or global norm
// and L1 decay add to an update program. The sum of squares is one channel of channel_sum.cuh (many blocks,
// their partial sums in double added in a fixed order), so a tensor gives the same bits on every run.
#include "kernels/cuda/channel_sum.cuh"
#include "kernels/cuda/clip_norm_launch.hpp"
#include "kernels/cuda/common.cuh"

namespace oar::cuda_kernels {

namespace {

template <class T>
struct Squares {
  const T* x;
  __device__ void operator()(int64_t i, int64_t, double* acc) const { acc[0] += double(x[i]) * double(x[i]); }
};

template <class T>
struct WriteSum {
  T* out;
  __device__ void operator()(int64_t, const double* sum) const { out[0] = T(sum[0]); }
};

// clip_by_norm's factor max_norm / max(norm, max_norm), into one device value.
template <class T>
struct WriteClipFactor {
  T* k;
  double max_norm;
  __device__ void operator()(int64_t, const double* sum) const {
    const double norm = sqrt(sum[0]);
    k[0] = T(max_norm / (norm < max_norm ? max_norm : norm));  // std::max(norm, max_norm): a NaN norm stays NaN
  }
};

template <class T>
__global__ void scale_by_value(const T* x, const T* k, T* out, int64_t n) {
  const T f = k[0];
  OAR_GRID_STRIDE(i, n) out[i] = x[i] * f;
}

template <class T>
__global__ void squared_l2_norm_grad_kernel(const T* x, const T* dout, T* dx, int64_t n) {
  const T g = T(2) * dout[0];
  OAR_GRID_STRIDE(i, n) dx[i] = g * x[i];
}

template <class T>
__global__ void sign_kernel(const T* x, T* out, int64_t n) {
  OAR_GRID_STRIDE(i, n) {
    const T v = x[i];
    out[i] = v > T(0) ? T(1) : (v < T(0) ? T(-1) : v);  // keeps 0, -0 and NaN, as the CPU kernel
  }
}

}  // namespace

int squared_l2_norm(Elem t, const void* x, void* out, int64_t n, void* scratch, Stream s) {
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    channel_sum<1>(n, 1, 1, scratch, Squares<T>{static_cast<const T*>(x)}, WriteSum<T>{static_cast<T*>(out)}, s);
    return launched();
  });
}

int squared_l2_norm_grad(Elem t, const void* x, const void* dout, void* dx, int64_t n, Stream s) {
  if (n == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    squared_l2_norm_grad_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(dout), static_cast<T*>(dx), n);
    return launched();
  });
}

int clip_by_norm(Elem t, const void* x, void* out, int64_t n, double max_norm, void* scratch, Stream s) {
  if (n == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    T* k = reinterpret_cast<T*>(static_cast<char*>(scratch) + channel_scratch_bytes(n, 1, 1, 1));
    channel_sum<1>(n, 1, 1, scratch, Squares<T>{static_cast<const T*>(x)}, WriteClipFactor<T>{k, max_norm}, s);
    scale_by_value<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), k, static_cast<T*>(out), n);
    return launched();
  });
}

int sign(Elem t, const void* x, void* out, int64_t n, Stream s) {
  if (n == 0) return 0;
  return by_any(t, [&](auto z) {
    using T = decltype(z);
    sign_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out), n);
    return launched();
  });
}

}  // namespace oar::cuda_kernels
