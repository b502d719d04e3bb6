// kernels/cuda/elementwise.cu: the element-wise device kernels: every unary and binary op from the functors
// the CPU kernels use (kernels/functors.hpp, kernels/functors_binary.hpp: one definition of the math), fill,
// scale, accumulate and mean. Launched through kernels/cuda/elementwise_launch.hpp.
#include <cub/block/block_reduce.cuh>
#include <type_traits>

#include "kernels/cuda/channel_sum.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/elementwise_launch.hpp"
#include "kernels/functors.hpp"
#include "kernels/functors_binary.hpp"

namespace oar::cuda_kernels {

namespace {

template <class T, class F>
__global__ void unary_kernel(const T* x, T* y, int64_t n, F f) {
  OAR_GRID_STRIDE(i, n) y[i] = f(x[i]);
}
template <class T, class F>
__global__ void unary_grad_kernel(const T* x, const T* y, const T* dy, T* dx, int64_t n, F f) {
  OAR_GRID_STRIDE(i, n) dx[i] = f.grad(x[i], y[i], dy[i]);
}

template <class F>
int unary_with(F f, Elem t, const void* x, void* y, int64_t n, Stream s) {
  if (n == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    unary_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y), n, f);
    return launched();
  });
}
template <class F>
int unary_grad_with(F f, Elem t, const void* x, const void* y, const void* dy, void* dx, int64_t n, Stream s) {
  if (n == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    unary_grad_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(y), static_cast<const T*>(dy),
                                                          static_cast<T*>(dx), n, f);
    return launched();
  });
}

// Y's index for X's flat index i under the broadcast: j of X's [pre, n, post] view.
__device__ __forceinline__ int64_t y_index(int64_t i, int64_t n, int64_t post, bool same) { return same ? i : (i / post) % n; }

template <class T, class F>
__global__ void binary_kernel(const T* x, const T* y, T* out, int64_t total, int64_t n, int64_t post, bool same, F f) {
  OAR_GRID_STRIDE(i, total) out[i] = f(x[i], y[y_index(i, n, post, same)]);
}
template <class T, class F>
__global__ void binary_dx_kernel(const T* x, const T* y, const T* dout, T* dx, int64_t total, int64_t n, int64_t post, bool same, F f) {
  OAR_GRID_STRIDE(i, total) dx[i] = f.dx(x[i], y[y_index(i, n, post, same)], dout[i]);
}
template <class T, class F>
__global__ void binary_dy_same_kernel(const T* x, const T* y, const T* dout, T* dy, int64_t total, F f) {
  OAR_GRID_STRIDE(i, total) dy[i] = f.dy(x[i], y[i], dout[i]);
}
// dy's terms for channel_sum, and where their sums go.
template <class T, class F>
struct DyTerm {
  const T *x, *y, *dout;
  F f;
  __device__ void operator()(int64_t i, int64_t j, double* acc) const { acc[0] += double(f.dy(x[i], y[j], dout[i])); }
};
template <class T>
struct StoreSum {
  T* out;
  __device__ void operator()(int64_t j, const double* sum) const { out[j] = T(sum[0]); }
};

template <class F>
int binary_with(F f, Elem t, const Broadcast& b, const void* x, const void* y, void* out, Stream s) {
  const int64_t total = b.same ? b.n : b.pre * b.n * b.post;
  if (total == 0) return 0;
  auto run = [&](auto z) {
    using T = decltype(z);
    binary_kernel<<<blocks_for(total), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(y), static_cast<T*>(out), total, b.n,
                                                          b.post, b.same, f);
    return launched();
  };
  if constexpr (F::integer) return by_any(t, run);
  else return by_float(t, run);
}

template <class F>
int binary_grad_with(F f, Elem t, const Broadcast& b, const void* x, const void* y, const void* dout, void* dx, void* dy, void* scratch, Stream s) {
  const int64_t total = b.same ? b.n : b.pre * b.n * b.post;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    const T *px = static_cast<const T*>(x), *py = static_cast<const T*>(y), *pd = static_cast<const T*>(dout);
    if (dx && total > 0) binary_dx_kernel<<<blocks_for(total), kThreads, 0, s>>>(px, py, pd, static_cast<T*>(dx), total, b.n, b.post, b.same, f);
    if (dy && b.same && total > 0) binary_dy_same_kernel<<<blocks_for(total), kThreads, 0, s>>>(px, py, pd, static_cast<T*>(dy), total, f);
    if (dy && !b.same && b.n > 0) {  // dy[j] = the sum of f.dy over X's elements at j
      channel_sum<1>(b.pre, b.n, b.post, scratch, DyTerm<T, F>{px, py, pd, f}, StoreSum<T>{static_cast<T*>(dy)}, s);
    }
    return launched();
  });
}

template <class T>
__global__ void fill_kernel(T* out, int64_t n, T v) {
  OAR_GRID_STRIDE(i, n) out[i] = v;
}
template <class T>
__global__ void scale_kernel(const T* x, T* out, int64_t n, double scale, double bias) {
  OAR_GRID_STRIDE(i, n) {
    if constexpr (std::is_floating_point_v<T>) out[i] = T(scale) * x[i] + T(bias);  // in T, as the CPU kernel
    else out[i] = T(scale * double(x[i]) + bias);
  }
}
template <class T>
__global__ void accumulate_kernel(const T* x, T* out, int64_t n) {
  OAR_GRID_STRIDE(i, n) out[i] += x[i];
}
// One block: a grid-stride sum in double, then the block's reduction.
template <class T>
__global__ void mean_kernel(const T* x, T* out, int64_t n) {
  using Reduce = cub::BlockReduce<double, 1024>;
  __shared__ typename Reduce::TempStorage tmp;
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += double(x[i]);
  const double sum = Reduce(tmp).Sum(acc);
  if (threadIdx.x == 0) out[0] = T(sum / double(n));
}
template <class T>
__global__ void mean_grad_kernel(const T* dout, T* dx, int64_t n) {
  const T g = T(double(dout[0]) / double(n));
  OAR_GRID_STRIDE(i, n) dx[i] = g;
}

}  // namespace

int unary(Unary op, float a, float b, Elem t, const void* x, void* y, int64_t n, Stream s) {
  switch (op) {
#define OAR_UNARY_CASE(kind, op_type, Functor, a0, d0, a1, d1) \
  case Unary::Functor: return unary_with(fn::Functor{a, b}, t, x, y, n, s);
    OAR_UNARY_OPS(OAR_UNARY_CASE)
#undef OAR_UNARY_CASE
  }
  return bad_type();
}

int unary_grad(Unary op, float a, float b, Elem t, const void* x, const void* y, const void* dy, void* dx, int64_t n, Stream s) {
  switch (op) {
#define OAR_UNARY_GRAD_CASE(kind, op_type, Functor, a0, d0, a1, d1) \
  case Unary::Functor: return unary_grad_with(fn::Functor{a, b}, t, x, y, dy, dx, n, s);
    OAR_UNARY_OPS(OAR_UNARY_GRAD_CASE)
#undef OAR_UNARY_GRAD_CASE
  }
  return bad_type();
}

int binary(Binary op, Elem t, const Broadcast& b, const void* x, const void* y, void* out, Stream s) {
  switch (op) {
#define OAR_BINARY_CASE(op_type, Op, Functor) \
  case Binary::Functor: return binary_with(fn::binary::Functor{}, t, b, x, y, out, s);
    OAR_BINARY_OPS(OAR_BINARY_CASE)
#undef OAR_BINARY_CASE
  }
  return bad_type();
}

int binary_grad(Binary op, Elem t, const Broadcast& b, const void* x, const void* y, const void* dout, void* dx, void* dy, void* scratch, Stream s) {
  switch (op) {
#define OAR_BINARY_GRAD_CASE(op_type, Op, Functor) \
  case Binary::Functor: return binary_grad_with(fn::binary::Functor{}, t, b, x, y, dout, dx, dy, scratch, s);
    OAR_BINARY_OPS(OAR_BINARY_GRAD_CASE)
#undef OAR_BINARY_GRAD_CASE
  }
  return bad_type();
}

int fill(void* out, int64_t n, int bytes, uint64_t pattern, Stream s) {
  if (n == 0) return 0;
  switch (bytes) {
    case 1: fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<uint8_t*>(out), n, uint8_t(pattern)); break;
    case 2: fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<uint16_t*>(out), n, uint16_t(pattern)); break;
    case 4: fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<uint32_t*>(out), n, uint32_t(pattern)); break;
    case 8: fill_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<uint64_t*>(out), n, uint64_t(pattern)); break;
    default: return bad_type();
  }
  return launched();
}

int scale(Elem t, const void* x, void* out, int64_t n, double scale, double bias, Stream s) {
  if (n == 0) return 0;
  return by_any(t, [&](auto z) {
    using T = decltype(z);
    scale_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out), n, scale, bias);
    return launched();
  });
}

int accumulate(Elem t, const void* x, void* out, int64_t n, Stream s) {
  if (n == 0) return 0;
  return by_any(t, [&](auto z) {
    using T = decltype(z);
    accumulate_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out), n);
    return launched();
  });
}

int mean(Elem t, const void* x, void* out, int64_t n, Stream s) {
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    mean_kernel<<<1, 1024, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(out), n);
    return launched();
  });
}

int mean_grad(Elem t, const void* dout, void* dx, int64_t n, Stream s) {
  if (n == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    mean_grad_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(dout), static_cast<T*>(dx), n);
    return launched();
  });
}

}  // namespace oar::cuda_kernels
