// kernels/cpu/dropout.hpp: dropout and dropout_grad on the CPU. The mask comes from the counter-based stream of
// kernels/random_counter.hpp, so it depends on the seed alone: not on the thread count, nor on the device.
#pragma once
#include "kernels/common/dropout.hpp"
#include "kernels/random_counter.hpp"
#include "oar/ops/dropout.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels {

inline constexpr int64_t kDropoutGrain = int64_t(1) << 14;


}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void Dropout::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  const kernels::DropoutPlan plan = kernels::dropout_plan(c, a);
  const double p = a.dropout_prob;
  const bool test = a.is_test;
  const int64_t n = xt.numel();
  LoDTensor* mask_t = plan.mask;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    if (&ot != &xt) ot.resize(xt.shape(), xt.dtype());
    if (mask_t) mask_t->resize(xt.shape(), xt.dtype());
    const T* px = xt.data<T>();
    T* po = ot.data<T>();
    T* pk = mask_t ? mask_t->data<T>() : nullptr;
    if (test) {
      const T f = T(keep_scale(a));
      parallel_for(0, n, cpu_kernels::kDropoutGrain, [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) po[i] = px[i] * f;
        if (pk) for (int64_t i = lo; i < hi; ++i) pk[i] = T(1);
      });
      return;
    }
    const T f = T(keep_scale(a));
    // Element i is kept when draw i of the counter-based stream is >= p: a function of (seed, i) alone, so the
    // mask is the same for any thread count, and on CUDA (kernels/cuda/nn.cu draws the same stream).
    const fn::CounterRng rng(plan.seed);
    parallel_for(0, n, cpu_kernels::kDropoutGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const T keep = rng.uniform(uint64_t(i)) < p ? T(0) : T(1);
        if (pk) pk[i] = keep;
        po[i] = px[i] * keep * f;
      }
    });
  });
  if (&ot != &xt) ot.set_lod(xt.lod());
}

inline void Dropout::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const kernels::DropoutGradPlan plan = kernels::dropout_grad_plan(c);
  const LoDTensor& dout = plan.out_grad;
  LoDTensor& dx = plan.x_grad;
  const double f = keep_scale(a);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(dout.shape(), dout.dtype());
    const T *pk = plan.mask.data<T>(), *pd = dout.data<T>();
    T* px = dx.data<T>();
    const T ft = T(f);
    parallel_for(0, dout.numel(), cpu_kernels::kDropoutGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) px[i] = pd[i] * pk[i] * ft;
    });
  });
  dx.set_lod(dout.lod());
}

}  // namespace oar::ops
