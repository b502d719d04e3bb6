// kernels/cpu/softmax.hpp: softmax, log_softmax and their grads on the CPU: one pass per line along the axis,
// lines split over the thread pool. The row helpers are shared with softmax_with_cross_entropy.
#pragma once
#include <cmath>
#include <limits>

#include "kernels/common/softmax.hpp"
#include "oar/ops/softmax.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels {

/// Lines per parallel_for chunk so that a chunk holds about 32K elements.
inline int64_t line_grain(int64_t n) { return std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(n, 1)); }

/// Max of n elements of x with stride s (NaN-propagating through the later exp; -inf for n == 0).
template <class T>
T line_max(const T* x, int64_t n, int64_t s) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t j = 0; j < n; ++j) m = x[j * s] > m ? x[j * s] : m;
  return m;
}

/// y = softmax(x) (or log_softmax when `log`) over n elements of stride s. Returns log(sum(exp(x - max))) and
/// stores the max in `*mx`. requires: y may alias x.
template <bool log, class T>
T softmax_line(const T* x, T* y, int64_t n, int64_t s, T* mx = nullptr) {
  const T m = line_max(x, n, s);
  T sum = 0;
  if (s == 1) {
    for (int64_t j = 0; j < n; ++j) {
      T e = std::exp(x[j] - m);
      sum += e;
      if constexpr (!log) y[j] = e;
    }
  } else {
    for (int64_t j = 0; j < n; ++j) {
      T e = std::exp(x[j * s] - m);
      sum += e;
      if constexpr (!log) y[j * s] = e;
    }
  }
  const T lse = std::log(sum);
  if constexpr (log) {
    for (int64_t j = 0; j < n; ++j) y[j * s] = x[j * s] - m - lse;
  } else {
    const T inv = T(1) / sum;
    for (int64_t j = 0; j < n; ++j) y[j * s] *= inv;
  }
  if (mx) *mx = m;
  return lse;
}

/// Out = softmax / log_softmax (`Op`) of X along `axis`.
template <bool log, class Op>
void softmax_forward(KernelContext& c, int axis) {
  const kernels::SoftmaxPlan p = kernels::softmax_plan<Op>(c, axis);
  const LoDTensor& x = p.x;
  LoDTensor& out = p.out;
  const kernels::AxisSplit sp = p.sp;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    if (&out != &x) out.resize(x.shape(), x.dtype());
    const T* px = x.data<T>();
    T* py = out.data<T>();
    parallel_for(0, sp.pre * sp.post, line_grain(sp.n), [&](int64_t lo, int64_t hi) {
      for (int64_t l = lo; l < hi; ++l) {
        int64_t off = (l / sp.post) * sp.n * sp.post + l % sp.post;
        softmax_line<log>(px + off, py + off, sp.n, sp.post);
      }
    });
  });
  if (&out != &x) out.set_lod(x.lod());
}

/// X@GRAD from Out and Out@GRAD (of `Op`): softmax dx = y * (dy - sum(dy * y)); log_softmax dx = dy - exp(y) * sum(dy).
template <bool log, class Op>
void softmax_backward(KernelContext& c, int axis) {
  if (!c.has_out(Op::x_grad)) return;
  const kernels::SoftmaxGradPlan p = kernels::softmax_grad_plan<Op>(c, axis);
  const kernels::AxisSplit sp = p.split;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *py = p.out.data<T>(), *pdy = p.out_grad.data<T>();
    T* pdx = p.x_grad.data<T>();
    const int64_t s = sp.post, n = sp.n;
    parallel_for(0, sp.pre * sp.post, line_grain(n), [&](int64_t lo, int64_t hi) {
      for (int64_t l = lo; l < hi; ++l) {
        int64_t off = (l / s) * n * s + l % s;
        const T *yl = py + off, *dyl = pdy + off;
        T* dxl = pdx + off;
        T acc = 0;
        if constexpr (log) {
          for (int64_t j = 0; j < n; ++j) acc += dyl[j * s];
          for (int64_t j = 0; j < n; ++j) dxl[j * s] = dyl[j * s] - std::exp(yl[j * s]) * acc;
        } else {
          for (int64_t j = 0; j < n; ++j) acc += dyl[j * s] * yl[j * s];
          for (int64_t j = 0; j < n; ++j) dxl[j * s] = yl[j * s] * (dyl[j * s] - acc);
        }
      }
    });
  });
}

}  // namespace oar::cpu_kernels

namespace oar::ops {
inline void Softmax::eval_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::softmax_forward<false, Softmax>(c, a.axis); }
inline void Softmax::eval_grad_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::softmax_backward<false, Softmax>(c, a.axis); }
inline void LogSoftmax::eval_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::softmax_forward<true, LogSoftmax>(c, a.axis); }
inline void LogSoftmax::eval_grad_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::softmax_backward<true, LogSoftmax>(c, a.axis); }
}  // namespace oar::ops
