// kernels/cpu/sigmoid_cross_entropy_with_logits.hpp: the element-wise logistic loss and its grad on the CPU.
#pragma once
#include <cmath>

#include "oar/ops/sigmoid_cross_entropy_with_logits.hpp"
#include "oar/runtime/kernel_context.hpp"
#include "oar/runtime/thread_pool.hpp"

namespace oar::ops {

inline void SigmoidCrossEntropyWithLogits::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  const LoDTensor& label = c.in("Label");
  LoDTensor& out = c.out("Out");
  c.check(label.shape() == x.shape(), "Label {} must have X's shape {}", label.shape(), x.shape());
  const int ignore = c.attr<int32_t>("ignore_index");
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    if (&out != &x) out.resize(x.shape(), x.dtype());
    const T *px = x.data<T>(), *pl = label.data<T>();
    T* po = out.data<T>();
    const T ig = T(ignore);
    parallel_for(0, x.numel(), int64_t(1) << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T v = px[i], l = pl[i];
        T r = std::max(v, T(0)) - v * l + std::log1p(std::exp(-std::abs(v)));
        po[i] = l == ig ? T(0) : r;
      }
    });
  });
  if (&out != &x) out.set_lod(x.lod());
}

inline void SigmoidCrossEntropyWithLogits::eval_grad_cpu(KernelContext& c) {
  if (!c.has_out("X@GRAD")) return;
  const LoDTensor& x = c.in("X");
  const LoDTensor& label = c.in("Label");
  const LoDTensor& dout = c.in("Out@GRAD");
  LoDTensor& dx = c.out("X@GRAD");
  c.check(dout.shape() == x.shape(), "Out@GRAD {} does not match X {}", dout.shape(), x.shape());
  const int ignore = c.attr<int32_t>("ignore_index");
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(x.shape(), x.dtype());
    const T *px = x.data<T>(), *pl = label.data<T>(), *pd = dout.data<T>();
    T* pdx = dx.data<T>();
    const T ig = T(ignore);
    parallel_for(0, x.numel(), int64_t(1) << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        T v = px[i];
        T e = std::exp(-std::abs(v));  // stable sigmoid
        T sig = v >= 0 ? T(1) / (T(1) + e) : e / (T(1) + e);
        pdx[i] = pl[i] == ig ? T(0) : (sig - pl[i]) * pd[i];
      }
    });
  });
  dx.set_lod(x.lod());
}

}  // namespace oar::ops
