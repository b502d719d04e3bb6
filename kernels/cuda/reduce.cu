// kernels/cuda/reduce.cu: reduce_sum / mean / max / min and their gradients over the kept and reduced dim
// groups of kernels::ReducePlan: one block per output element (CUB's block reduction), one thread per
// element of X for the gradients.
#include <cub/block/block_reduce.cuh>

#include <cfloat>
#include <climits>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/reduce_launch.hpp"

namespace oar::cuda_kernels {

namespace {

template <class T> struct Acc { using type = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>; };

template <class T> __device__ T lowest() {
  if constexpr (std::is_same_v<T, float>) return -INFINITY;
  else if constexpr (std::is_same_v<T, double>) return -INFINITY;
  else if constexpr (std::is_same_v<T, int32_t>) return INT32_MIN;
  else return INT64_MIN;
}
template <class T> __device__ T highest() {
  if constexpr (std::is_same_v<T, float>) return INFINITY;
  else if constexpr (std::is_same_v<T, double>) return INFINITY;
  else if constexpr (std::is_same_v<T, int32_t>) return INT32_MAX;
  else return INT64_MAX;
}

// X's offset of output index o (its kept coordinates).
__device__ int64_t base_of(const ReduceGroups& g, int64_t o) {
  int64_t at = 0;
  for (int k = 0; k < g.groups; ++k)
    if (!g.red[k]) at += ((o / g.ostride[k]) % g.size[k]) * g.xstride[k];
  return at;
}
// X's offset of the e-th reduced element of an output (its reduced coordinates).
__device__ int64_t reduced_offset(const ReduceGroups& g, int64_t e) {
  int64_t at = 0;
  for (int k = g.groups - 1; k >= 0; --k)
    if (g.red[k]) {
      at += (e % g.size[k]) * g.xstride[k];
      e /= g.size[k];
    }
  return at;
}

template <class T, int R>
__global__ void reduce_kernel(ReduceGroups g, const T* x, T* out) {
  using A = std::conditional_t<R == int(Reduce::max) || R == int(Reduce::min), T, typename Acc<T>::type>;
  using Block = cub::BlockReduce<A, kThreads>;
  __shared__ typename Block::TempStorage tmp;
  for (int64_t o = blockIdx.x; o < g.out_numel; o += gridDim.x) {
    const int64_t base = base_of(g, o);
    A a = R == int(Reduce::max) ? A(lowest<T>()) : R == int(Reduce::min) ? A(highest<T>()) : A(0);
    for (int64_t e = threadIdx.x; e < g.count; e += blockDim.x) {
      const T v = x[base + reduced_offset(g, e)];
      if constexpr (R == int(Reduce::max)) a = v > a ? v : a;
      else if constexpr (R == int(Reduce::min)) a = v < a ? v : a;
      else a += A(v);
    }
    A all;
    if constexpr (R == int(Reduce::max)) all = Block(tmp).Reduce(a, [](A p, A q) { return q > p ? q : p; });
    else if constexpr (R == int(Reduce::min)) all = Block(tmp).Reduce(a, [](A p, A q) { return q < p ? q : p; });
    else all = Block(tmp).Sum(a);
    if (threadIdx.x == 0) {
      if constexpr (R == int(Reduce::mean)) {
        if constexpr (std::is_floating_point_v<T>) out[o] = T(double(all) / double(g.count));  // count 0: NaN
        else out[o] = g.count ? T(all / A(g.count)) : T(0);
      } else {
        out[o] = T(all);
      }
    }
    __syncthreads();
  }
}

template <class T, int R>
__global__ void reduce_grad_kernel(ReduceGroups g, const T* x, const T* out, const T* dout, T* dx, int64_t n) {
  OAR_GRID_STRIDE(i, n) {
    int64_t rest = i, o = 0;
    for (int k = g.groups - 1; k >= 0; --k) {
      if (!g.red[k]) o += (rest % g.size[k]) * g.ostride[k];
      rest /= g.size[k];
    }
    if constexpr (R == int(Reduce::max) || R == int(Reduce::min)) dx[i] = x[i] == out[o] ? dout[o] : T(0);
    else if constexpr (R == int(Reduce::mean)) dx[i] = dout[o] * (T(1) / T(g.count));
    else dx[i] = dout[o];
  }
}

template <int R>
int reduce_as(Elem t, const ReduceGroups& g, const void* x, void* out, Stream s) {
  if (g.out_numel == 0) return 0;
  const unsigned blocks = unsigned(g.out_numel < 65535 ? g.out_numel : 65535);
  return by_any(t, [&](auto z) {
    using T = decltype(z);
    reduce_kernel<T, R><<<blocks, kThreads, 0, s>>>(g, static_cast<const T*>(x), static_cast<T*>(out));
    return launched();
  });
}
template <int R>
int reduce_grad_as(Elem t, const ReduceGroups& g, const void* x, const void* out, const void* dout, void* dx, Stream s) {
  const int64_t n = g.out_numel * g.count;
  if (n == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    reduce_grad_kernel<T, R><<<blocks_for(n), kThreads, 0, s>>>(g, static_cast<const T*>(x), static_cast<const T*>(out), static_cast<const T*>(dout),
                                                                 static_cast<T*>(dx), n);
    return launched();
  });
}

}  // namespace

int reduce(Reduce r, Elem t, const ReduceGroups& g, const void* x, void* out, Stream s) {
  switch (r) {
    case Reduce::sum: return reduce_as<int(Reduce::sum)>(t, g, x, out, s);
    case Reduce::mean: return reduce_as<int(Reduce::mean)>(t, g, x, out, s);
    case Reduce::max: return reduce_as<int(Reduce::max)>(t, g, x, out, s);
    case Reduce::min: return reduce_as<int(Reduce::min)>(t, g, x, out, s);
  }
  return bad_type();
}

int reduce_grad(Reduce r, Elem t, const ReduceGroups& g, const void* x, const void* out, const void* dout, void* dx, Stream s) {
  switch (r) {
    case Reduce::sum: return reduce_grad_as<int(Reduce::sum)>(t, g, x, out, dout, dx, s);
    case Reduce::mean: return reduce_grad_as<int(Reduce::mean)>(t, g, x, out, dout, dx, s);
    case Reduce::max: return reduce_grad_as<int(Reduce::max)>(t, g, x, out, dout, dx, s);
    case Reduce::min: return reduce_grad_as<int(Reduce::min)>(t, g, x, out, dout, dx, s);
  }
  return bad_type();
}

}  // namespace oar::cuda_kernels
