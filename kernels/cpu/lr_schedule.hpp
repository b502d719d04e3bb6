// kernels/cpu/lr_schedule.hpp: lr_schedule on the CPU (a scalar formula, ops/lr_schedule.hpp).
#pragma once
#include "oar/ops/lr_schedule.hpp"
#include "oar/runtime/kernel_context.hpp"

namespace oar::ops {

inline void LrSchedule::eval_cpu(KernelContext& c) {
  const LoDTensor& step = c.in("Step");
  c.check(step.numel() == 1, "Step must have one element, got {}", step.shape());
  if (c.op().attr<std::string>("kind") == "piecewise") {
    auto b = c.attr<std::vector<float>>("boundaries");
    auto v = c.attr<std::vector<float>>("values");
    c.check(!v.empty() && v.size() == b.size() + 1, "piecewise needs one more value than boundaries, got {} values and {} boundaries", v.size(), b.size());
  }
  LoDTensor& out = c.out("LearningRate");
  out.resize(Shape{1}, DType::f32);
  out.data<float>()[0] = float(lr_at(c.op(), step.get(0)));
}

}  // namespace oar::ops
