// kernels/cpu/squared_l2_norm.hpp: squared_l2_norm and squared_l2_norm_grad on the CPU.
#pragma once
#include "kernels/cpu/sum_all.hpp"
#include "oar/ops/squared_l2_norm.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::ops {

inline void SquaredL2Norm::eval_cpu(KernelContext& c, const NoAttrs&) {
  const LoDTensor& x = c.in(SquaredL2Norm::x);
  LoDTensor& out = c.out(SquaredL2Norm::out);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = x.data<T>();
    double s = cpu_kernels::sum_all(x.numel(), [&](int64_t i) { return double(p[i]) * double(p[i]); });
    out.resize(Shape{1}, x.dtype());
    out.data<T>()[0] = T(s);
  });
}

inline void SquaredL2Norm::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  if (!c.has_out(SquaredL2Norm::x_grad)) return;
  const LoDTensor& x = c.in(SquaredL2Norm::x);
  const LoDTensor& dout = c.in(SquaredL2Norm::out_grad);
  LoDTensor& dx = c.out(SquaredL2Norm::x_grad);
  c.check(dout.numel() == 1, "Out@GRAD must hold one value, got {}", dout.shape());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T g = T(2) * dout.data<T>()[0];
    dx.resize(x.shape(), x.dtype());
    const T* px = x.data<T>();
    T* p = dx.data<T>();
    parallel_for(0, x.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) p[i] = g * px[i];
    });
  });
  dx.set_lod(x.lod());
}

}  // namespace oar::ops
