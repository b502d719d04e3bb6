// kernels/cpu/amp.hpp: the CPU kernels of check_finite_and_unscale and update_loss_scaling (ops/amp.hpp).
#pragma once
#include <cmath>

#include "kernels/common/amp.hpp"
#include "kernels/loss_scale.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/ops/amp.hpp"

namespace oar::cpu_kernels::amp {

/// The one f32 loss scale of `slot`.
inline float scale_value(const KernelContext& c, Slot slot) {
  const LoDTensor& s = c.in(slot);
  c.check(s.numel() == 1 && s.dtype() == DType::f32, "{} must be one float32, got {} {}", slot.name, name(s.dtype()), s.shape());
  return s.data<float>()[0];
}

}  // namespace oar::cpu_kernels::amp

namespace oar::ops {

inline void CheckFiniteAndUnscale::eval_cpu(KernelContext& c, const NoAttrs&) {
  using namespace cpu_kernels::amp;
  const float inv = 1.f / scale_value(c, scale);
  bool found = false;
  for (size_t i = 0; i < c.num_in(x); ++i) {
    auto [xt, ot] = kernels::amp::grad_pair(c, i);
    c.dispatch(type_list<float, double>{}, xt->dtype(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      const T* p = xt->data<T>();
      T* o = ot->data<T>();
      const T k = T(inv);
      for (int64_t j = 0; j < xt->numel(); ++j) {
        found = found || !std::isfinite(p[j]);
        o[j] = p[j] * k;
      }
    });
  }
  LoDTensor& f = c.out(found_infinite);
  f.resize(Shape{1}, DType::boolean);
  f.data<bool>()[0] = found;
}

inline void UpdateLossScaling::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& found = c.in(found_infinite);
  c.check(found.numel() == 1 && found.dtype() == DType::boolean, "FoundInfinite must be one bool, got {} {}", name(found.dtype()), found.shape());
  float s = cpu_kernels::amp::scale_value(c, prev_loss_scaling);
  const LoDTensor& g = c.in(in_good_steps);
  const LoDTensor& b = c.in(in_bad_steps);
  c.check(g.numel() == 1 && g.dtype() == DType::i32 && b.numel() == 1 && b.dtype() == DType::i32, "InGoodSteps and InBadSteps must be one int32 each");
  int32_t good = g.data<int32_t>()[0], bad = b.data<int32_t>()[0];
  fn::next_loss_scale(found.data<bool>()[0], s, good, bad, a.incr_every_n_steps, a.decr_every_n_nan_or_inf, a.incr_ratio, a.decr_ratio);
  LoDTensor& so = c.out(loss_scaling);
  LoDTensor& go = c.out(out_good_steps);
  LoDTensor& bo = c.out(out_bad_steps);
  so.resize(Shape{1}, DType::f32);
  go.resize(Shape{1}, DType::i32);
  bo.resize(Shape{1}, DType::i32);
  so.data<float>()[0] = s;
  go.data<int32_t>()[0] = good;
  bo.data<int32_t>()[0] = bad;
}

}  // namespace oar::ops
