// kernels/cpu/cross_entropy.hpp: cross_entropy and its grad on the CPU, rows split over the thread pool;
// hard labels are checked (serially, so the first bad row is the one reported) before any work.
#pragma once
#include <cmath>
#include <limits>

#include "kernels/common/cross_entropy.hpp"
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

/// Hard labels as int64, each checked to be in [0, d) or equal to `ignore`; an oar::Error names the first bad row.
/// The labels live in the calling thread's scratch (valid until its next call; no allocation once it has grown).
/// requires: `label` holds `rows` values (kernels::xent::check_operands).
inline const int64_t* read_hard_labels(const KernelContext& c, const LoDTensor& label, int64_t rows, int64_t d, int64_t ignore) {
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

/// The gradient kernels of cross_entropy and softmax_with_cross_entropy: `out_slot` (X@GRAD, Logits@GRAD) shaped
/// like `x`, written row by row over the thread pool by row(out_row, x_row, soft label row or null, hard label,
/// g_i, d), with g (Y@GRAD, Loss@GRAD) one value per row. Nothing is done when the gradient is not wanted.
template <class Row>
void xent_grad(KernelContext& c, Slot out_slot, const LoDTensor& x, std::string_view x_name, const LoDTensor& label, const LoDTensor& g,
               std::string_view g_name, bool soft, int64_t ignore, Row row) {
  if (!c.has_out(out_slot)) return;
  LoDTensor& dx = c.out(out_slot);
  const kernels::xent::Rows rc = kernels::xent::check_operands(c, x, x_name, label, soft, &g, g_name);
  const int64_t n = rc.n, d = rc.d;
  const int64_t* hard = soft ? nullptr : read_hard_labels(c, label, n, d, ignore);
  c.dispatch(type_list<float, double>{}, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(x.shape(), x.dtype());
    const T *px = x.data<T>(), *pg = g.data<T>();
    const T* pl = soft ? label.data<T>() : nullptr;
    T* pdx = dx.data<T>();
    parallel_for(0, n, row_grain(d), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) row(pdx + i * d, px + i * d, pl ? pl + i * d : nullptr, hard ? hard[i] : ignore, pg[i], d);
    });
  });
  dx.set_lod(x.lod());
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void CrossEntropy::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const LoDTensor& lt = c.in(label);
  LoDTensor& yt = c.out(y);
  const bool soft = a.soft_label;
  const int64_t ignore = a.ignore_index;
  const kernels::xent::Rows rc = kernels::xent::check_operands(c, xt, "X", lt, soft);
  const int64_t n = rc.n, d = rc.d;
  const int64_t* hard = soft ? nullptr : cpu_kernels::read_hard_labels(c, lt, n, d, ignore);
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    yt.resize(detail::ce_loss_shape(xt.shape()), xt.dtype());
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
  const int64_t ignore = a.ignore_index;
  cpu_kernels::xent_grad(c, x_grad, c.in(x), "X", c.in(label), c.in(y_grad), "Y@GRAD", a.soft_label, ignore,
                         [&](auto* r, const auto* xr, const auto* lr, int64_t l, auto g, int64_t d) {
                           if (lr) {  // -sum_j l_j log x_j
                             for (int64_t j = 0; j < d; ++j) r[j] = -lr[j] * g / xr[j];
                           } else {
                             for (int64_t j = 0; j < d; ++j) r[j] = 0;
                             if (l != ignore) r[l] = -g / xr[l];
                           }
                         });
}

}  // namespace oar::ops
