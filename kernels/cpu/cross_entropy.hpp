// kernels/cpu/cross_entropy.hpp: cross_entropy and its grad on the CPU, rows split over the thread pool;
// hard labels are checked (serially, so the first bad row is the one reported) before any work.
#pragma once
#include <cmath>
#include <limits>

#include "kernels/cpu/scratch.hpp"
#include "oar/ops/cross_entropy.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels {

/// -log(x) with Fluid's TolerableValue clamp: +-inf becomes +-1e20, NaN stays NaN.
template <class T>
T tolerable_neg_log(T x) {
  T v = -std::log(x);
  constexpr T big = T(1e20);
  if (v == std::numeric_limits<T>::infinity()) return big;
  if (v == -std::numeric_limits<T>::infinity()) return -big;
  return v;
}

/// Rows (all dims but the last) and classes (the last dim) of `s`.
inline std::pair<int64_t, int64_t> rows_cols(const Shape& s) {
  int64_t d = s.rank() > 0 ? s[s.rank() - 1] : 1;
  return {s.rank() > 1 ? s.numel(0, s.rank() - 1) : 1, d};
}

/// Hard labels as int64, each checked to be in [0, d) or equal to `ignore`; an oar::Error names the first bad row.
/// The labels live in the calling thread's scratch (valid until its next call; no allocation once it has grown).
inline const int64_t* read_hard_labels(const KernelContext& c, const LoDTensor& label, int64_t rows, int64_t d, int64_t ignore) {
  c.check(label.numel() == rows, "Label {} must hold one class index per row ({} rows)", label.shape(), rows);
  int64_t* out = thread_scratch<int64_t, 0>(size_t(rows));
  c.dispatch(type_list<int64_t, int32_t>{}, label.dtype(), [&](auto tag) {
    using L = typename decltype(tag)::type;
    const L* p = label.data<L>();
    for (int64_t i = 0; i < rows; ++i) out[i] = int64_t(p[i]);
  });
  for (int64_t i = 0; i < rows; ++i) {
    int64_t l = out[i];
    c.check(l == ignore || (l >= 0 && l < d), "label {} at row {} is out of range [0, {}) (ignore_index is {})", l, i, d, ignore);
  }
  return out;
}

/// Rows per parallel_for chunk so that a chunk holds about 32K elements.
inline int64_t row_grain(int64_t d) { return std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(d, 1)); }

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void CrossEntropy::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const LoDTensor& lt = c.in(label);
  LoDTensor& yt = c.out(y);
  const bool soft = a.soft_label;
  const int64_t ignore = a.ignore_index;
  auto [n, d] = cpu_kernels::rows_cols(xt.shape());
  Shape ys = xt.shape();
  ys[ys.rank() - 1] = 1;
  const int64_t* hard = nullptr;
  if (soft) c.check(lt.shape() == xt.shape(), "soft_label needs Label {} shaped like X {}", lt.shape(), xt.shape());
  else hard = cpu_kernels::read_hard_labels(c, lt, n, d, ignore);
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    yt.resize(ys, xt.dtype());
    const T* px = xt.data<T>();
    T* py = yt.data<T>();
    if (soft) {
      const T* pl = lt.data<T>();
      parallel_for(0, n, cpu_kernels::row_grain(d), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          T s = 0;
          for (int64_t j = 0; j < d; ++j) s += pl[i * d + j] * cpu_kernels::tolerable_neg_log(px[i * d + j]);
          py[i] = s;
        }
      });
    } else {
      for (int64_t i = 0; i < n; ++i) {
        int64_t l = hard[i];
        py[i] = l == ignore ? T(0) : cpu_kernels::tolerable_neg_log(px[i * d + l]);
      }
    }
  });
  yt.set_lod(xt.lod());
}

inline void CrossEntropy::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& lt = c.in(label);
  const LoDTensor& dy = c.in(y_grad);
  LoDTensor& dx = c.out(x_grad);
  const bool soft = a.soft_label;
  const int64_t ignore = a.ignore_index;
  auto [n, d] = cpu_kernels::rows_cols(xt.shape());
  c.check(dy.numel() == n, "Y@GRAD {} must hold one value per row of X {}", dy.shape(), xt.shape());
  const int64_t* hard = nullptr;
  if (!soft) hard = cpu_kernels::read_hard_labels(c, lt, n, d, ignore);
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(xt.shape(), xt.dtype());
    const T *px = xt.data<T>(), *pdy = dy.data<T>();
    const T* pl = soft ? lt.data<T>() : nullptr;
    T* pdx = dx.data<T>();
    parallel_for(0, n, cpu_kernels::row_grain(d), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T* r = pdx + i * d;
        const T* xr = px + i * d;
        if (soft) {
          const T* lr = pl + i * d;
          for (int64_t j = 0; j < d; ++j) r[j] = -lr[j] * pdy[i] / xr[j];
        } else {
          for (int64_t j = 0; j < d; ++j) r[j] = 0;
          int64_t l = hard[i];
          if (l != ignore) r[l] = -pdy[i] / xr[l];
        }
      }
    });
  });
  dx.set_lod(xt.lod());
}

}  // namespace oar::ops
