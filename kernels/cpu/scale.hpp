// kernels/cpu/scale.hpp: scale and scale_grad on the CPU.
#pragma once
#include "oar/ops/scale.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::ops {

/// In place allowed (Out == X). Integer tensors compute in double and truncate toward zero.
inline void Scale::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  const double s = a.scale, b = a.bias;
  const bool after = a.bias_after_scale;
  c.dispatch(type_list<float, double, int32_t, int64_t>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (&ot != &xt) ot.resize(xt.shape(), xt.dtype());
    const T* px = xt.data<T>();
    T* po = ot.data<T>();
    parallel_for(0, xt.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      if constexpr (std::is_floating_point_v<T>) {
        const T ts = T(s), tb = after ? T(b) : T(s * b);  // scale * (x + b) = scale * x + scale * b
        for (int64_t i = lo; i < hi; ++i) po[i] = ts * px[i] + tb;
      } else {
        const double tb = after ? b : s * b;
        for (int64_t i = lo; i < hi; ++i) po[i] = T(s * double(px[i]) + tb);
      }
    });
  });
  if (&ot != &xt) ot.set_lod(xt.lod());
}

/// X@GRAD = scale * Out@GRAD.
inline void Scale::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& dout = c.in(out_grad);
  LoDTensor& dx = c.out(x_grad);
  const float s = a.scale;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    if (&dx != &dout) dx.resize(dout.shape(), dout.dtype());
    const T* pd = dout.data<T>();
    T* p = dx.data<T>();
    parallel_for(0, dout.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) p[i] = T(s) * pd[i];
    });
  });
  if (&dx != &dout) dx.set_lod(dout.lod());
}

}  // namespace oar::ops
