// kernels/cpu/mean.hpp: mean and mean_grad on the CPU.
#pragma once
#include "kernels/cpu/sum_all.hpp"
#include "oar/ops/mean.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::ops {

inline void Mean::eval_cpu(KernelContext& c, const NoAttrs&) {
  const LoDTensor& x = c.in(Mean::x);
  LoDTensor& out = c.out(Mean::out);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = x.data<T>();
    double s = cpu_kernels::sum_all(x.numel(), [&](int64_t i) { return p[i]; });
    out.resize(Shape{1}, x.dtype());
    out.data<T>()[0] = T(s / double(x.numel()));  // 0 / 0 = NaN for an empty X
  });
}

inline void Mean::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  if (!c.has_out(Mean::x_grad)) return;
  const LoDTensor& x = c.in(Mean::x);
  const LoDTensor& dout = c.in(Mean::out_grad);
  LoDTensor& dx = c.out(Mean::x_grad);
  c.check(dout.numel() == 1, "Out@GRAD must hold one value, got {}", dout.shape());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T g = T(double(dout.data<T>()[0]) / double(x.numel()));
    dx.resize(x.shape(), x.dtype());
    T* p = dx.data<T>();
    parallel_for(0, x.numel(), 1 << 15, [&](int64_t lo, int64_t hi) { std::fill(p + lo, p + hi, g); });
  });
  dx.set_lod(x.lod());
}

}  // namespace oar::ops
