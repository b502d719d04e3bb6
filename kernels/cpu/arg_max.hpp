// kernels/cpu/arg_max.hpp: arg_max, arg_min and top_k on the CPU, parallel over rows.
#pragma once
#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/common/arg_max.hpp"
#include "kernels/cpu/scratch.hpp"
#include "oar/ops/arg_max.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels {

template <class T>
bool is_nan_value(T v) {
  if constexpr (std::is_floating_point_v<T>) return std::isnan(v);
  else return false;
}

/// Whether a comes before b in "largest first" order: NaN first, then larger values; equal ones by index.
template <class T>
bool before_desc(T va, int64_t a, T vb, int64_t b) {
  bool na = is_nan_value(va), nb = is_nan_value(vb);
  if (na || nb) return na && nb ? a < b : na;
  return va != vb ? va > vb : a < b;
}

/// Out[o, i] = index along the middle dim of x seen as [outer, n, inner] of the max (Max) or min element.
template <bool Max>
void arg_reduce(KernelContext& c, const ops::tensor_detail::ArgAttrs& a) {
  using N = ops::tensor_detail::ArgNames;
  const LoDTensor& x = c.in(N::x);
  const kernels::ArgPlan pl = kernels::arg_plan(c, x, a);
  const int64_t outer = pl.outer, n = pl.n, inner = pl.inner;
  const Shape& os = pl.out;
  LoDTensor& out = c.out(N::out);
  c.dispatch(type_list<float, double, int32_t, int64_t>{}, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    out.resize(os, DType::i64);
    int64_t* po = out.data<int64_t>();
    parallel_for(0, outer * inner, std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(n, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const T* p = px + (r / inner) * n * inner + r % inner;
        int64_t best = 0;
        for (int64_t j = 1; j < n; ++j) {
          T v = p[j * inner], b = p[best * inner];
          bool better = Max ? before_desc(v, j, b, best) : (is_nan_value(v) ? !is_nan_value(b) : (!is_nan_value(b) && v < b));
          if (better) best = j;
        }
        po[r] = best;
      }
    });
  });
  out.clear_lod();
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void ArgMax::eval_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::arg_reduce<true>(c, a); }
inline void ArgMin::eval_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::arg_reduce<false>(c, a); }

inline void TopK::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  c.check(xt.rank() >= 1, "X must have rank >= 1, got {}", xt.shape());
  const int64_t kv = a.k, n = xt.dim(xt.rank() - 1), rows = n ? xt.numel() / n : xt.shape().numel(0, xt.rank() - 1);
  c.check(kv <= n, "k = {} is more than the last dim of X {}", kv, xt.shape());
  Shape os = xt.shape();
  os[os.rank() - 1] = kv;
  LoDTensor& ot = c.out(out);
  LoDTensor& ind = c.out(indices);
  c.dispatch(type_list<float, double, int32_t, int64_t>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ot.resize(os, xt.dtype());
    ind.resize(os, DType::i64);
    const T* px = xt.data<T>();
    T* po = ot.data<T>();
    int64_t* pi = ind.data<int64_t>();
    parallel_for(0, rows, std::max<int64_t>(1, (int64_t(1) << 12) / std::max<int64_t>(n, 1)), [&](int64_t lo, int64_t hi) {
      int64_t* order = cpu_kernels::thread_scratch<int64_t, 51>(size_t(n));  // this thread's, reused across runs
      for (int64_t r = lo; r < hi; ++r) {
        const T* p = px + r * n;
        std::iota(order, order + n, int64_t(0));
        std::partial_sort(order, order + kv, order + n, [&](int64_t ia, int64_t ib) { return cpu_kernels::before_desc(p[ia], ia, p[ib], ib); });
        for (int64_t j = 0; j < kv; ++j) {
          po[r * kv + j] = p[order[j]];
          pi[r * kv + j] = order[j];
        }
      }
    });
  });
  ot.set_lod(xt.lod());
  ind.set_lod(xt.lod());
}

}  // namespace oar::ops
