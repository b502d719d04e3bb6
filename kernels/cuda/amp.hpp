// kernels/cuda/amp.hpp: eval_cuda of check_finite_and_unscale, update_loss_scaling (kernels/cuda/amp.cu) and
// logical_not. The loss scale, the step counts and FoundInfinite stay on the device: a training step reads none
// of them on the host (the update ops read FoundInfinite there as their SkipUpdate).
#pragma once
#include "kernels/common/amp.hpp"  // grad_pair: the same checks on both places
#include "kernels/cuda/amp_launch.hpp"
#include "kernels/cuda/elementwise_launch.hpp"
#include "kernels/cuda/host.hpp"
#include "oar/ops/amp.hpp"
#include "oar/ops/compare.hpp"

namespace oar::ops {

inline void CheckFiniteAndUnscale::eval_cuda(KernelContext& c, const NoAttrs&) {
  const LoDTensor& s = c.in(scale);
  c.check(s.numel() == 1 && s.dtype() == DType::f32, "Scale must be one float32, got {} {}", name(s.dtype()), s.shape());
  LoDTensor& f = c.out(found_infinite);
  f.resize(Shape{1}, DType::boolean);
  const cuda_kernels::Stream st = cuda_kernels::stream(c);
  cuda_kernels::check(c, cuda_kernels::fill(f.raw(), 1, 1, 0, st));
  for (size_t i = 0; i < c.num_in(x); ++i) {
    auto [xt, ot] = kernels::amp::grad_pair(c, i);
    cuda_kernels::check(c, cuda_kernels::unscale_and_check(cuda_kernels::elem(c, xt->dtype()), xt->raw(), ot->raw(), xt->numel(), s.data<float>(),
                                                           f.data<bool>(), st));
  }
}

inline void UpdateLossScaling::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& found = c.in(found_infinite);
  const LoDTensor& prev = c.in(prev_loss_scaling);
  const LoDTensor& g = c.in(in_good_steps);
  const LoDTensor& b = c.in(in_bad_steps);
  c.check(found.numel() == 1 && found.dtype() == DType::boolean, "FoundInfinite must be one bool, got {} {}", name(found.dtype()), found.shape());
  c.check(prev.numel() == 1 && prev.dtype() == DType::f32, "PrevLossScaling must be one float32, got {} {}", name(prev.dtype()), prev.shape());
  c.check(g.numel() == 1 && g.dtype() == DType::i32 && b.numel() == 1 && b.dtype() == DType::i32, "InGoodSteps and InBadSteps must be one int32 each");
  LoDTensor& so = c.out(loss_scaling);
  LoDTensor& go = c.out(out_good_steps);
  LoDTensor& bo = c.out(out_bad_steps);
  so.resize(Shape{1}, DType::f32);  // in a training program these are the inputs themselves: nothing moves
  go.resize(Shape{1}, DType::i32);
  bo.resize(Shape{1}, DType::i32);
  cuda_kernels::check(c, cuda_kernels::update_loss_scaling(found.data<bool>(), prev.data<float>(), g.data<int32_t>(), b.data<int32_t>(), so.data<float>(),
                                                           go.data<int32_t>(), bo.data<int32_t>(), a.incr_every_n_steps, a.decr_every_n_nan_or_inf,
                                                           a.incr_ratio, a.decr_ratio, cuda_kernels::stream(c)));
}

inline void LogicalNot::eval_cuda(KernelContext& c, const NoAttrs&) {
  const LoDTensor& xt = c.in(x);
  c.check(xt.dtype() == DType::boolean, "X must be bool, got {}", name(xt.dtype()));
  LoDTensor& o = c.out(out);
  if (&o != &xt) o.resize(xt.shape(), DType::boolean);
  cuda_kernels::check(c, cuda_kernels::logical_not(xt.data<bool>(), o.data<bool>(), xt.numel(), cuda_kernels::stream(c)));
  if (&o != &xt) o.set_lod(xt.lod());
}

}  // namespace oar::ops
