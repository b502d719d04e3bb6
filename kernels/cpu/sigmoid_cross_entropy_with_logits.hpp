// kernels/cpu/sigmoid_cross_entropy_with_logits.hpp: the element-wise logistic loss and its grad on the CPU.
#pragma once
#include <cmath>

#include "kernels/common/sigmoid_cross_entropy_with_logits.hpp"
#include "oar/ops/sigmoid_cross_entropy_with_logits.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::ops {

inline void SigmoidCrossEntropyWithLogits::eval_cpu(KernelContext& c, const Attrs& a) {
  const kernels::SigmoidCrossEntropyPlan p = kernels::sigmoid_cross_entropy_plan(c);
  const int ignore = a.ignore_index;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = p.x.data<T>(), *pl = p.label.data<T>();
    T* po = p.out.data<T>();
    const T ig = T(ignore);
    parallel_for(0, p.x.numel(), int64_t(1) << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T v = px[i], l = pl[i];
        T r = std::max(v, T(0)) - v * l + std::log1p(std::exp(-std::abs(v)));
        po[i] = l == ig ? T(0) : r;
      }
    });
  });
  if (&p.out != &p.x) p.out.set_lod(p.x.lod());
}

inline void SigmoidCrossEntropyWithLogits::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const kernels::SigmoidCrossEntropyGradPlan p = kernels::sigmoid_cross_entropy_grad_plan(c);
  const LoDTensor& xt = p.x;
  LoDTensor& dx = p.x_grad;
  const int ignore = a.ignore_index;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(xt.shape(), xt.dtype());
    const T *px = xt.data<T>(), *pl = p.label.data<T>(), *pd = p.out_grad.data<T>();
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
