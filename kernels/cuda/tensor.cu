// kernels/cuda/tensor.cu: cast and the permuted copy of transpose.
#include "kernels/cast.hpp"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/tensor_launch.hpp"

namespace oar::cuda_kernels {

namespace {

template <class From, class To>
__global__ void cast_kernel(const From* x, To* out, int64_t n) {
  OAR_GRID_STRIDE(i, n) out[i] = fn::cast_value<From, To>(x[i]);
}

/// Calls f(T{}) for the type `t` names, bool included.
template <class F>
int by_cast_type(Elem t, F&& f) {
  if (t == Elem::b8) return f(bool{});
  if (t == Elem::f16) return f(half{});
  if (t == Elem::bf16) return f(bfloat16{});
  return by_any(t, f);
}

template <class U>
__global__ void permute_kernel(Permute p, const U* x, U* out, int64_t n) {
  OAR_GRID_STRIDE(i, n) {
    int64_t rem = i, at = 0;
    for (int k = p.rank - 1; k >= 0; --k) {
      at += (rem % p.dims[k]) * p.strides[k];
      rem /= p.dims[k];
    }
    out[i] = x[at];
  }
}

}  // namespace

int cast(Elem from, Elem to, const void* x, void* out, int64_t n, Stream s) {
  if (n == 0) return 0;
  return by_cast_type(from, [&](auto zf) {
    using From = decltype(zf);
    return by_cast_type(to, [&](auto zt) {
      using To = decltype(zt);
      cast_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const From*>(x), static_cast<To*>(out), n);
      return launched();
    });
  });
}

int permute(int bytes, const Permute& p, const void* x, void* out, int64_t n, Stream s) {
  if (n == 0) return 0;
  switch (bytes) {
    case 1: permute_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, static_cast<const uint8_t*>(x), static_cast<uint8_t*>(out), n); break;
    case 2: permute_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, static_cast<const uint16_t*>(x), static_cast<uint16_t*>(out), n); break;
    case 4: permute_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, static_cast<const uint32_t*>(x), static_cast<uint32_t*>(out), n); break;
    case 8: permute_kernel<<<blocks_for(n), kThreads, 0, s>>>(p, static_cast<const uint64_t*>(x), static_cast<uint64_t*>(out), n); break;
    default: return bad_type();
  }
  return launched();
}

}  // namespace oar::cuda_kernels
