// kernels/cpu/sum.hpp: sum and sum_grad on the CPU.
#pragma once
#include "kernels/common/sum.hpp"
#include "oar/ops/sum.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::ops {

/// requires: every X[i] has X[0]'s shape and dtype. Out may be one of the X (in place): that input is the start
/// and the others are added to it. Inputs are looked up by index, so a run allocates nothing.
inline void Sum::eval_cpu(KernelContext& c, const NoAttrs&) {
  if (const Value* v = c.in_value(Sum::x, 0); v && v->is_list()) [[unlikely]]
    return kernels::array::sum(c);
  const size_t k = c.num_in(Sum::x);
  const LoDTensor& x0 = c.in(Sum::x, 0);
  LoDTensor& o = c.out(Sum::out);
  size_t first = kernels::sum_inputs(c, o);  // the input Out aliases starts the sum; without one, X[0] is copied first
  const bool copy_first = first == k;
  if (copy_first) {
    o.resize(x0.shape(), x0.dtype());
    first = 0;
  }
  c.dispatch(type_list<float, double, int32_t, int64_t>{}, x0.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* po = o.data<T>();
    parallel_for(0, x0.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      if (copy_first) std::copy(x0.data<T>() + lo, x0.data<T>() + hi, po + lo);
      for (size_t j = 0; j < k; ++j) {
        if (j == first) continue;
        const T* r = c.in(Sum::x, j).data<T>();
        for (int64_t i = lo; i < hi; ++i) po[i] += r[i];
      }
    });
  });
  if (&o != &x0) o.set_lod(x0.lod());
}

/// X@GRAD[i] = Out@GRAD for every wanted i.
inline void Sum::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  const LoDTensor& dout = c.in(Sum::out_grad);
  for (size_t i = 0; i < c.num_out(Sum::x_grad); ++i) {
    if (!c.has_out(Sum::x_grad, i)) continue;
    LoDTensor& dx = c.out(Sum::x_grad, i);
    dx.copy_from(dout);
    if (i < c.num_in(Sum::x) && c.has_in(Sum::x, i)) dx.set_lod(c.in(Sum::x, i).lod());
  }
}

}  // namespace oar::ops
