// kernels/cuda/logic.cu: the device kernels of the comparison and logical ops (with the std:: functors the CPU
// kernels apply, ops/compare.hpp's lists), one_hot and sigmoid_cross_entropy_with_logits and its gradient (the
// arithmetic of kernels/cpu/sigmoid_cross_entropy_with_logits.hpp, line for line). Launched through
// kernels/cuda/logic_launch.hpp.
#include <algorithm>
#include <cmath>
#include <functional>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/logic_launch.hpp"

namespace oar::cuda_kernels {

namespace {

// y's index for x's flat index i: j of x's [pre, n, post] view (as elementwise.cu's binary kernels).
template <class T, class Cmp>
__global__ void compare_kernel(const T* x, const T* y, bool* out, int64_t total, int64_t n, int64_t post, bool same, Cmp cmp) {
  OAR_GRID_STRIDE(i, total) out[i] = cmp(x[i], y[same ? i : (i / post) % n]);
}

template <class F>
__global__ void logical_kernel(const bool* x, const bool* y, bool* out, int64_t n, F f) {
  OAR_GRID_STRIDE(i, n) out[i] = f(x[i], y[i]);
}

template <class T, class L>
__global__ void one_hot_kernel(const L* label, T* out, int64_t total, int64_t depth) {
  OAR_GRID_STRIDE(k, total) out[k] = int64_t(label[k / depth]) == k % depth ? T(1) : T(0);
}

template <class T>
__global__ void sigmoid_cross_entropy_kernel(const T* x, const T* label, T* out, int64_t n, T ig) {
  OAR_GRID_STRIDE(i, n) {
    const T v = x[i], l = label[i];
    const T r = std::max(v, T(0)) - v * l + std::log1p(std::exp(-std::abs(v)));
    out[i] = l == ig ? T(0) : r;
  }
}

template <class T>
__global__ void sigmoid_cross_entropy_grad_kernel(const T* x, const T* label, const T* dout, T* dx, int64_t n, T ig) {
  OAR_GRID_STRIDE(i, n) {
    const T v = x[i], l = label[i];
    const T e = std::exp(-std::abs(v));  // stable sigmoid
    const T sig = v >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
    dx[i] = l == ig ? T(0) : (sig - l) * dout[i];
  }
}

template <class Cmp>
int compare_with(Cmp cmp, Elem t, const Broadcast& b, const void* x, const void* y, bool* out, Stream s) {
  const int64_t total = b.same ? b.n : b.pre * b.n * b.post;
  if (total == 0) return 0;
  return by_any(t, [&](auto z) {
    using T = decltype(z);
    compare_kernel<<<blocks_for(total), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(y), out, total, b.n, b.post, b.same, cmp);
    return launched();
  });
}

template <class F>
int logical_with(F f, const bool* x, const bool* y, bool* out, int64_t n, Stream s) {
  if (n == 0) return 0;
  logical_kernel<<<blocks_for(n), kThreads, 0, s>>>(x, y, out, n, f);
  return launched();
}

}  // namespace

// NOTE: one case per line of OAR_COMPARE_OPS and OAR_LOGICAL_BINARY_OPS (ops/compare.hpp, which nvcc does not
// read), with the functor that line names; tests/cuda/logic.cpp compares every op with the CPU.
int compare(Compare op, Elem t, const Broadcast& b, const void* x, const void* y, bool* out, Stream s) {
  switch (op) {
    case Compare::less_than: return compare_with(std::less<>{}, t, b, x, y, out, s);
    case Compare::less_equal: return compare_with(std::less_equal<>{}, t, b, x, y, out, s);
    case Compare::greater_than: return compare_with(std::greater<>{}, t, b, x, y, out, s);
    case Compare::greater_equal: return compare_with(std::greater_equal<>{}, t, b, x, y, out, s);
    case Compare::equal: return compare_with(std::equal_to<>{}, t, b, x, y, out, s);
    case Compare::not_equal: return compare_with(std::not_equal_to<>{}, t, b, x, y, out, s);
  }
  return bad_type();
}

int logical(Logical op, const bool* x, const bool* y, bool* out, int64_t n, Stream s) {
  switch (op) {
    case Logical::logical_and: return logical_with(std::logical_and<>{}, x, y, out, n, s);
    case Logical::logical_or: return logical_with(std::logical_or<>{}, x, y, out, n, s);
    case Logical::logical_xor: return logical_with(std::not_equal_to<>{}, x, y, out, n, s);
  }
  return bad_type();
}

int one_hot(Elem t, Elem label_t, const void* label, void* out, int64_t n, int64_t depth, Stream s) {
  const int64_t total = n * depth;
  if (total == 0) return 0;
  return by_any(t, [&](auto z) {
    using T = decltype(z);
    auto run = [&](auto w) {
      using L = decltype(w);
      one_hot_kernel<<<blocks_for(total), kThreads, 0, s>>>(static_cast<const L*>(label), static_cast<T*>(out), total, depth);
      return launched();
    };
    if (label_t == Elem::i32) return run(int32_t{});
    if (label_t == Elem::i64) return run(int64_t{});
    return bad_type();
  });
}

int sigmoid_cross_entropy(Elem t, const void* x, const void* label, void* out, int64_t n, int ignore_index, Stream s) {
  if (n == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    sigmoid_cross_entropy_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(label), static_cast<T*>(out), n,
                                                                     T(ignore_index));
    return launched();
  });
}

int sigmoid_cross_entropy_grad(Elem t, const void* x, const void* label, const void* dout, void* dx, int64_t n, int ignore_index, Stream s) {
  if (n == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    sigmoid_cross_entropy_grad_kernel<<<blocks_for(n), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(label),
                                                                          static_cast<const T*>(dout), static_cast<T*>(dx), n, T(ignore_index));
    return launched();
  });
}

}  // namespace oar::cuda_kernels
