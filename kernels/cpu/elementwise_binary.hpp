// kernels/cpu/elementwise_binary.hpp: the one CPU launcher for the binary functors of kernels/functors_binary.hpp
// (forward, and the grads with Y@GRAD summed over the broadcast dims), and the eval_cpu / eval_grad_cpu of every
// op in OAR_BINARY_OPS. Nothing here is written per op.
// Hand-written: faster than an xtensor broadcast expression, which walks views element by element (oar_bench nd_broadcast_add).
#pragma once
#include <algorithm>
#include <vector>

#include "kernels/common/elementwise_binary.hpp"
#include "kernels/functors_binary.hpp"
#include "oar/ops/elementwise_binary.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels {

inline constexpr int64_t kBinaryGrain = 1 << 14;

namespace detail {

/// out[i, j, k] = g(i_flat, j) over X's [pre, n, post] view, where g gets the flat index into X and the index
/// into Y. Parallel over the rows (post == 1) or over the (i, j) segments of length post.
template <class G>
void for_each_broadcast(const ops::BroadcastDims& b, G&& g) {
  if (b.same) {
    parallel_for(0, b.n, kBinaryGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) g(i, i);
    });
  } else if (b.post == 1) {  // [pre, n] + [n]: the bias add
    const int64_t n = b.n;
    parallel_for(0, b.pre, std::max<int64_t>(1, kBinaryGrain / std::max<int64_t>(n, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i)
        for (int64_t j = 0; j < n; ++j) g(i * n + j, j);
    });
  } else {  // [pre, n, post] + [n]: y[j] is constant along post
    const int64_t n = b.n, post = b.post;
    parallel_for(0, b.pre * n, std::max<int64_t>(1, kBinaryGrain / post), [&](int64_t lo, int64_t hi) {
      for (int64_t s = lo; s < hi; ++s) {
        const int64_t j = s % n, base = s * post;
        for (int64_t k = 0; k < post; ++k) g(base + k, j);
      }
    });
  }
}

/// dy[j] = sum over i, k of g(flat index into X, j). requires: not b.same. ensures: every dy[j] is written.
template <class T, class G>
void reduce_broadcast(const ops::BroadcastDims& b, T* dy, G&& g) {
  const int64_t pre = b.pre, n = b.n, post = b.post;
  std::fill(dy, dy + n, T(0));
  if (pre * n * post == 0) return;
  const int threads = num_threads();
  if (post == 1) {
    // Each chunk of rows sums into its own partial row; the partials are added at the end.
    const int64_t chunks = std::clamp<int64_t>(pre * n / kBinaryGrain, 1, std::min<int64_t>(pre, threads));
    auto rows = [&](int64_t r0, int64_t r1, T* acc) {
      for (int64_t i = r0; i < r1; ++i)
        for (int64_t j = 0; j < n; ++j) acc[j] += g(i * n + j, j);
    };
    if (chunks == 1) return rows(0, pre, dy);
    std::vector<T> part(size_t(chunks * n), T(0));
    parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t ch = lo; ch < hi; ++ch) rows(pre * ch / chunks, pre * (ch + 1) / chunks, part.data() + ch * n);
    });
    for (int64_t ch = 0; ch < chunks; ++ch)
      for (int64_t j = 0; j < n; ++j) dy[j] += part[size_t(ch * n + j)];
    return;
  }
  // post > 1: each dy[j] is independent; parallel over j. The sum runs in kLanes partial sums (a vector
  // register's worth), which the compiler vectorizes: one running sum is a chain of dependent adds (a bias
  // gradient of LeNet's first conv: 1.0 -> 0.2 ms).
  constexpr int64_t kLanes = 16;
  parallel_for(0, n, std::max<int64_t>(1, kBinaryGrain / (pre * post)), [&](int64_t lo, int64_t hi) {
    for (int64_t j = lo; j < hi; ++j) {
      T lane[kLanes] = {};
      T s = T(0);
      for (int64_t i = 0; i < pre; ++i) {
        const int64_t base = (i * n + j) * post;
        int64_t k = 0;
        for (; k + kLanes <= post; k += kLanes)
          for (int64_t l = 0; l < kLanes; ++l) lane[l] += g(base + k + l, j);
        for (; k < post; ++k) s += g(base + k, j);
      }
      for (int64_t l = 0; l < kLanes; ++l) s += lane[l];
      dy[j] = s;
    }
  });
}

template <class F, class Fn>
void dispatch_binary(const KernelContext& c, DType t, Fn&& fn) {
  if constexpr (F::integer) c.dispatch(type_list<float, double, int32_t, int64_t>{}, t, fn);
  else c.dispatch(type_list<float, double>{}, t, fn);
}

}  // namespace detail

/// Out = f(X, Y) with Y broadcast (ops::broadcast_dims). requires: X, Y initialized, same dtype.
/// ensures: Out has X's shape and LoD. In-place allowed on X (Out == X), and on Y when the shapes are equal.
template <class F>
void binary_forward(KernelContext& c, const ops::BinaryOp::Attrs& a) {
  using Op = ops::BinaryOp;
  const F f{};
  const LoDTensor& x = c.in(Op::x);
  const LoDTensor& y = c.in(Op::y);
  LoDTensor& out = c.out(Op::out);
  const ops::BroadcastDims b = kernels::run_broadcast(c, x, y, a.axis);
  c.check(&out != &y || b.same, "Out may share Y only when X and Y have the same shape (X {}, Y {})", x.shape(), y.shape());
  detail::dispatch_binary<F>(c, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (&out != &x && &out != &y) out.resize(x.shape(), x.dtype());
    const T *px = x.data<T>(), *py = y.data<T>();
    T* po = out.data<T>();
    detail::for_each_broadcast(b, [&](int64_t i, int64_t j) { po[i] = f(px[i], py[j]); });
  });
  if (&out != &x) out.set_lod(x.lod());
}

/// X@GRAD = f.dx(X, Y, Out@GRAD) (X's shape); Y@GRAD = f.dy(...) summed over the dims Y was broadcast along.
template <class F>
void binary_backward(KernelContext& c, const ops::BinaryOp::Attrs& a) {
  using Op = ops::BinaryOp;
  const F f{};
  const LoDTensor& x = c.in(Op::x);
  const LoDTensor& y = c.in(Op::y);
  const LoDTensor& dout = c.in(Op::out_grad);
  const ops::BroadcastDims b = kernels::run_broadcast(c, x, y, a.axis);
  c.check(dout.shape() == x.shape(), "Out@GRAD {} does not match X {}", dout.shape(), x.shape());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = x.data<T>(), *py = y.data<T>(), *pd = dout.data<T>();
    if (c.has_out(Op::x_grad)) {
      LoDTensor& dx = c.out(Op::x_grad);
      dx.resize(x.shape(), x.dtype());
      T* p = dx.data<T>();
      detail::for_each_broadcast(b, [&](int64_t i, int64_t j) { p[i] = f.dx(px[i], py[j], pd[i]); });
      dx.set_lod(x.lod());
    }
    if (c.has_out(Op::y_grad)) {
      LoDTensor& dy = c.out(Op::y_grad);
      dy.resize(y.shape(), y.dtype());
      T* p = dy.data<T>();
      if (b.same) detail::for_each_broadcast(b, [&](int64_t i, int64_t) { p[i] = f.dy(px[i], py[i], pd[i]); });
      else detail::reduce_broadcast<T>(b, p, [&](int64_t i, int64_t j) { return f.dy(px[i], py[j], pd[i]); });
      dy.set_lod(y.lod());
    }
  });
}

}  // namespace oar::cpu_kernels

namespace oar::ops {
#define OAR_DEFINE_BINARY_KERNELS(type, Op, Functor)                                                          \
  inline void Op::eval_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::binary_forward<fn::binary::Functor>(c, a); }      \
  inline void Op::eval_grad_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::binary_backward<fn::binary::Functor>(c, a); }
OAR_BINARY_OPS(OAR_DEFINE_BINARY_KERNELS)
#undef OAR_DEFINE_BINARY_KERNELS
}  // namespace oar::ops
