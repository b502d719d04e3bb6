// kernels/cpu/reduce.hpp: reduce_{sum,mean,max,min} and their grads on the CPU. X's dims are merged into runs of
// kept / reduced dims; [K, R] (rows) and [K1, R, K2] (a slab) run in parallel, other patterns serially.
// Hand-written: faster than xt::sum over a middle axis, as fast over rows (oar_bench nd_reduce_sum).
#pragma once
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/common/reduce.hpp"
#include "oar/ops/reduce.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels {

inline constexpr int64_t kReduceGrain = 1 << 14;

/// The reducers: an accumulator type A, its identity, add(a, x), merge(a, b) and the final value for `count`
/// reduced elements. Floating sums accumulate in double.
template <class T> struct SumReducer {
  using A = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;
  static A init() { return A(0); }
  static A add(A a, T x) { return a + A(x); }
  static A merge(A a, A b) { return a + b; }
  static T finish(A a, int64_t) { return T(a); }
};
template <class T> struct MeanReducer : SumReducer<T> {
  using A = typename SumReducer<T>::A;
  static T finish(A a, int64_t count) {
    if constexpr (std::is_floating_point_v<T>) return T(a / A(count));  // count 0: NaN
    else return count ? T(a / A(count)) : T(0);
  }
};
template <class T> struct MaxReducer {
  using A = T;
  static A init() { return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest(); }
  static A add(A a, T x) { return x > a ? x : a; }
  static A merge(A a, A b) { return add(a, b); }
  static T finish(A a, int64_t) { return a; }
};
template <class T> struct MinReducer {
  using A = T;
  static A init() { return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max(); }
  static A add(A a, T x) { return x < a ? x : a; }
  static A merge(A a, A b) { return add(a, b); }
  static T finish(A a, int64_t) { return a; }
};

using kernels::make_reduce_plan;
using kernels::ReducePlan;

/// Calls f(x_offset, out_offset, out_step, len) for each contiguous run of X along the innermost group, in
/// order, over the segments [seg_lo, seg_hi) of the other groups.
template <class F>
void for_each_segment(const ReducePlan& p, int64_t seg_lo, int64_t seg_hi, F&& f) {
  const size_t inner = p.size.size() - 1;
  const int64_t len = p.size[inner], ostep = p.ostride[inner];
  for (int64_t q = seg_lo; q < seg_hi; ++q) {
    int64_t rest = q, o = 0;
    for (size_t g = inner; g-- > 0;) {
      o += (rest % p.size[g]) * p.ostride[g];
      rest /= p.size[g];
    }
    f(q * len, o, ostep, len);
  }
}

inline int64_t num_segments(const ReducePlan& p) {
  int64_t n = 1;
  for (size_t g = 0; g + 1 < p.size.size(); ++g) n *= p.size[g];
  return n;
}

/// out = R over the plan's reduced runs of x. ensures: every out element is written.
template <template <class> class R, class T>
void reduce_forward(const ReducePlan& p, const T* x, T* out) {
  using Red = R<T>;
  using A = typename Red::A;
  const int64_t xn = p.out_numel * p.count;
  if (xn == 0) {  // nothing to read: identities (sum 0, mean NaN, max -inf)
    for (int64_t o = 0; o < p.out_numel; ++o) out[o] = Red::finish(Red::init(), p.count);
    return;
  }
  const int G = int(p.size.size());
  auto row = [&](const T* r, int64_t n) {
    A a = Red::init();
    for (int64_t i = 0; i < n; ++i) a = Red::add(a, r[i]);
    return a;
  };
  if (p.num_reduced() == 0) {  // nothing reduced: a copy (mean divides by 1)
    parallel_for(0, xn, kReduceGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) out[i] = Red::finish(Red::add(Red::init(), x[i]), 1);
    });
  } else if (p.num_reduced() == 1 && p.red[size_t(G - 1)]) {  // [K, R]: one contiguous row per output
    const int64_t rows = p.out_numel, n = p.count;
    if (rows == 1) {  // full reduction: partials merged
      const int64_t chunks = std::clamp<int64_t>(n / kReduceGrain, 1, num_threads());
      std::vector<A> part(size_t(chunks), Red::init());
      parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
        for (int64_t ch = lo; ch < hi; ++ch) part[size_t(ch)] = row(x + n * ch / chunks, n * (ch + 1) / chunks - n * ch / chunks);
      });
      A a = Red::init();
      for (A v : part) a = Red::merge(a, v);
      out[0] = Red::finish(a, n);
    } else {
      parallel_for(0, rows, std::max<int64_t>(1, kReduceGrain / n), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) out[i] = Red::finish(row(x + i * n, n), n);
      });
    }
  } else if (p.num_reduced() == 1) {  // [K1, R, K2]: accumulate R slabs of K2, column blocks in parallel
    const int gr = p.red[0] ? 0 : 1;
    const int64_t k1 = gr == 0 ? 1 : p.size[0], r = p.size[size_t(gr)], k2 = p.size[size_t(gr + 1)];
    const int64_t block = 256, nblocks = (k2 + block - 1) / block;
    parallel_for(0, k1 * nblocks, std::max<int64_t>(1, kReduceGrain / (r * block)), [&](int64_t lo, int64_t hi) {
      std::vector<A> acc(static_cast<size_t>(block));
      for (int64_t t = lo; t < hi; ++t) {
        const int64_t i = t / nblocks, j0 = (t % nblocks) * block, j1 = std::min(k2, j0 + block), w = j1 - j0;
        std::fill(acc.begin(), acc.begin() + w, Red::init());
        for (int64_t s = 0; s < r; ++s) {
          const T* src = x + (i * r + s) * k2 + j0;
          for (int64_t j = 0; j < w; ++j) acc[size_t(j)] = Red::add(acc[size_t(j)], src[j]);
        }
        for (int64_t j = 0; j < w; ++j) out[i * k2 + j0 + j] = Red::finish(acc[size_t(j)], r);
      }
    });
  } else {  // several reduced runs: one serial pass over X into accumulators
    std::vector<A> acc(size_t(p.out_numel), Red::init());
    for_each_segment(p, 0, num_segments(p), [&](int64_t xo, int64_t o, int64_t os, int64_t len) {
      for (int64_t t = 0; t < len; ++t) acc[size_t(o + t * os)] = Red::add(acc[size_t(o + t * os)], x[xo + t]);
    });
    for (int64_t o = 0; o < p.out_numel; ++o) out[o] = Red::finish(acc[size_t(o)], p.count);
  }
}

/// dx[i] = h(i, o(i)) where o(i) is the output element x[i] reduces into; parallel over segments.
template <class H>
void reduce_backward(const ReducePlan& p, H&& h) {
  const int64_t segs = num_segments(p), len = p.size.back();
  if (segs * len == 0) return;
  parallel_for(0, segs, std::max<int64_t>(1, kReduceGrain / len), [&](int64_t lo, int64_t hi) {
    for_each_segment(p, lo, hi, [&](int64_t xo, int64_t o, int64_t os, int64_t n) {
      for (int64_t t = 0; t < n; ++t) h(xo + t, o + t * os);
    });
  });
}

template <template <class> class R>
void reduce_kernel(KernelContext& c, const ops::ReduceOp::Attrs& a) {
  const LoDTensor& x = c.in(ops::ReduceOp::x);
  LoDTensor& out = c.out(ops::ReduceOp::out);
  std::string why;
  auto axes = ops::reduce_axes(x.shape(), a.dim, a.reduce_all, why);
  c.check(why.empty(), "{}", why);
  const ReducePlan p = make_reduce_plan(x.shape(), axes);
  c.dispatch(type_list<float, double, int32_t, int64_t>{}, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    c.check(&out != &x, "Out must not be X");
    out.resize(ops::reduce_shape(x.shape(), axes, a.keep_dim), x.dtype());
    reduce_forward<R, T>(p, x.data<T>(), out.data<T>());
  });
}

/// sum: dx = dout[o]; mean: dout[o] / count; max / min: dout[o] * (x == out[o]).
template <template <class> class R>
void reduce_grad_kernel(KernelContext& c, const ops::ReduceOp::Attrs& a) {
  if (!c.has_out(ops::ReduceOp::x_grad)) return;
  const LoDTensor& x = c.in(ops::ReduceOp::x);
  const LoDTensor& dout = c.in(ops::ReduceOp::out_grad);
  LoDTensor& dx = c.out(ops::ReduceOp::x_grad);
  std::string why;
  auto axes = ops::reduce_axes(x.shape(), a.dim, a.reduce_all, why);
  c.check(why.empty(), "{}", why);
  const ReducePlan p = make_reduce_plan(x.shape(), axes);
  c.check(dout.numel() == p.out_numel, "Out@GRAD {} does not match the reduced shape of X {}", dout.shape(), x.shape());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(x.shape(), x.dtype());
    const T *pd = dout.data<T>(), *px = x.data<T>();
    T* g = dx.data<T>();
    if constexpr (std::is_same_v<R<T>, MaxReducer<T>> || std::is_same_v<R<T>, MinReducer<T>>) {
      const T* po = c.in(ops::ReduceOp::out).data<T>();
      reduce_backward(p, [&](int64_t i, int64_t o) { g[i] = px[i] == po[o] ? pd[o] : T(0); });
    } else if constexpr (std::is_same_v<R<T>, MeanReducer<T>>) {
      const T k = T(1) / T(p.count);
      reduce_backward(p, [&](int64_t i, int64_t o) { g[i] = pd[o] * k; });
    } else {
      reduce_backward(p, [&](int64_t i, int64_t o) { g[i] = pd[o]; });
    }
  });
  dx.set_lod(x.lod());
}

}  // namespace oar::cpu_kernels

namespace oar::ops {
#define OAR_DEFINE_REDUCE_KERNELS(type, Op, Reducer, with_out)                                  \
  inline void Op::eval_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::reduce_kernel<cpu_kernels::Reducer>(c, a); }           \
  inline void Op::eval_grad_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::reduce_grad_kernel<cpu_kernels::Reducer>(c, a); }
OAR_REDUCE_OPS(OAR_DEFINE_REDUCE_KERNELS)
#undef OAR_DEFINE_REDUCE_KERNELS
}  // namespace oar::ops
