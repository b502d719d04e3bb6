// kernels/cpu/sigmoid_cross_entropy_with_logits.hpp: the element-wise logistic loss and its grad on the CPU.
#pragma once
#include <cmath>

#include "oar/ops/sigmoid_cross_entropy_with_logits.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::ops {

inline void SigmoidCrossEntropyWithLogits::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const LoDTensor& lt = c.in(label);
  LoDTensor& ot = c.out(out);
  c.check(lt.shape() == xt.shape(), "Label {} must have X's shape {}", lt.shape(), xt.shape());
  const int ignore = a.ignore_index;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    if (&ot != &xt) ot.resize(xt.shape(), xt.dtype());
    const T *px = xt.data<T>(), *pl = lt.data<T>();
    T* po = ot.data<T>();
    const T ig = T(ignore);
    parallel_for(0, xt.numel(), int64_t(1) << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T v = px[i], l = pl[i];
        T r = std::max(v, T(0)) - v * l + std::log1p(std::exp(-std::abs(v)));
        po[i] = l == ig ? T(0) : r;
      }
    });
  });
  if (&ot != &xt) ot.set_lod(xt.lod());
}

inline void SigmoidCrossEntropyWithLogits::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& lt = c.in(label);
  const LoDTensor& dout = c.in(out_grad);
  LoDTensor& dx = c.out(x_grad);
  c.check(dout.shape() == xt.shape(), "Out@GRAD {} does not match X {}", dout.shape(), xt.shape());
  const int ignore = a.ignore_index;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(xt.shape(), xt.dtype());
    const T *px = xt.data<T>(), *pl = lt.data<T>(), *pd = dout.data<T>();
    T* pdx = dx.data<T>();
    const T ig = T(ignore);
    parallel_for(0, xt.numel(), int64_t(1) << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T v = px[i];
        T e = std::exp(-std::abs(v));  // stable sigmoid
        T sig = v >= 0 ? T(1) / (T(1) + e) : e / (T(1) + e);
        pdx[i] = pl[i] == ig ? T(0) : (sig - pl[i]) * pd[i];
      }
    });
  });
  dx.set_lod(xt.lod());
}

}  // namespace oar::ops
