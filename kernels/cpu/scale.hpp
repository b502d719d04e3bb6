// kernels/cpu/scale.hpp: scale and scale_grad on the CPU.
#pragma once
#include "oar/ops/scale.hpp"
#include "oar/runtime/kernel_context.hpp"
#include "oar/runtime/thread_pool.hpp"

namespace oar::ops {

/// In place allowed (Out == X). Integer tensors compute in double and truncate toward zero.
inline void Scale::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  LoDTensor& out = c.out("Out");
  const double s = c.attr<float>("scale"), b = c.attr<float>("bias");
  const bool after = c.attr<bool>("bias_after_scale");
  c.dispatch(type_list<float, double, int32_t, int64_t>{}, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (&out != &x) out.resize(x.shape(), x.dtype());
    const T* px = x.data<T>();
    T* po = out.data<T>();
    parallel_for(0, x.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      if constexpr (std::is_floating_point_v<T>) {
        const T ts = T(s), tb = after ? T(b) : T(s * b);  // scale * (x + b) = scale * x + scale * b
        for (int64_t i = lo; i < hi; ++i) po[i] = ts * px[i] + tb;
      } else {
        const double tb = after ? b : s * b;
        for (int64_t i = lo; i < hi; ++i) po[i] = T(s * double(px[i]) + tb);
      }
    });
  });
  if (&out != &x) out.set_lod(x.lod());
}

/// X@GRAD = scale * Out@GRAD.
inline void Scale::eval_grad_cpu(KernelContext& c) {
  if (!c.has_out("X@GRAD")) return;
  const LoDTensor& dout = c.in("Out@GRAD");
  LoDTensor& dx = c.out("X@GRAD");
  const float s = c.attr<float>("scale");
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
