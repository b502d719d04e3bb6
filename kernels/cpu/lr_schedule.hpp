// kernels/cpu/lr_schedule.hpp: lr_schedule on the CPU (a scalar formula, ops/lr_schedule.hpp).
#pragma once
#include "oar/ops/lr_schedule.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::ops {

inline void LrSchedule::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& st = c.in(step);
  c.check(st.numel() == 1, "Step must have one element, got {}", st.shape());
  if (a.kind == Kind::piecewise)
    c.check(!a.values.empty() && a.values.size() == a.boundaries.size() + 1,
            "piecewise needs one more value than boundaries, got {} values and {} boundaries", a.values.size(), a.boundaries.size());
  LoDTensor& out = c.out(learning_rate);
  out.resize(Shape{1}, DType::f32);
  out.data<float>()[0] = float(lr_at(a, st.get(0)));
}

}  // namespace oar::ops
