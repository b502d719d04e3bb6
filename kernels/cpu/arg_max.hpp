// kernels/cpu/arg_max.hpp: arg_max, arg_min and top_k on the CPU, parallel over rows.
#pragma once
#include <algorithm>
#include <cmath>
#include <numeric>

#include "oar/ops/arg_max.hpp"
#include "oar/runtime/kernel_context.hpp"
#include "oar/runtime/thread_pool.hpp"

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
void arg_reduce(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  c.check(x.rank() >= 1, "X must have rank >= 1, got {}", x.shape());
  int axis = ops::tensor_detail::normalize_axis(c, c.attr<int64_t>("axis"), x.rank(), "axis", x.shape());
  const int64_t outer = x.shape().numel(0, axis), n = x.dim(axis), inner = x.shape().numel(axis + 1, x.rank());
  c.check(n > 0 || outer * inner == 0, "{} over an empty axis {} of X {}", c.op().type(), axis, x.shape());
  Shape os = x.shape();
  if (c.attr<bool>("keepdims")) os[axis] = 1;
  else os.erase(axis);
  LoDTensor& out = c.out("Out");
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

inline void ArgMax::eval_cpu(KernelContext& c) { cpu_kernels::arg_reduce<true>(c); }
inline void ArgMin::eval_cpu(KernelContext& c) { cpu_kernels::arg_reduce<false>(c); }

inline void TopK::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  c.check(x.rank() >= 1, "X must have rank >= 1, got {}", x.shape());
  const int64_t k = c.attr<int32_t>("k"), n = x.dim(x.rank() - 1), rows = n ? x.numel() / n : x.shape().numel(0, x.rank() - 1);
  c.check(k <= n, "k = {} is more than the last dim of X {}", k, x.shape());
  Shape os = x.shape();
  os[os.rank() - 1] = k;
  LoDTensor& out = c.out("Out");
  LoDTensor& ind = c.out("Indices");
  c.dispatch(type_list<float, double, int32_t, int64_t>{}, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    out.resize(os, x.dtype());
    ind.resize(os, DType::i64);
    const T* px = x.data<T>();
    T* po = out.data<T>();
    int64_t* pi = ind.data<int64_t>();
    parallel_for(0, rows, std::max<int64_t>(1, (int64_t(1) << 12) / std::max<int64_t>(n, 1)), [&](int64_t lo, int64_t hi) {
      std::vector<int64_t> order(static_cast<size_t>(n));
      for (int64_t r = lo; r < hi; ++r) {
        const T* p = px + r * n;
        std::iota(order.begin(), order.end(), int64_t(0));
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) { return cpu_kernels::before_desc(p[a], a, p[b], b); });
        for (int64_t j = 0; j < k; ++j) {
          po[r * k + j] = p[order[size_t(j)]];
          pi[r * k + j] = order[size_t(j)];
        }
      }
    });
  });
  out.set_lod(x.lod());
  ind.set_lod(x.lod());
}

}  // namespace oar::ops
