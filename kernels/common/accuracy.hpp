// kernels/common/accuracy.hpp: the outputs accuracy's kernels write on every place.
#pragma once
#include "oar/ops/accuracy.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// Accuracy (f32), Correct and Total (i32), resized to [1]: what accuracy's kernels on every place write.
struct AccuracyOut {
  LoDTensor &accuracy, &correct, &total;
};
inline AccuracyOut accuracy_out(const KernelContext& c) {
  using A = ops::Accuracy;
  AccuracyOut o{c.out(A::accuracy), c.out(A::correct), c.out(A::total)};
  o.accuracy.resize(Shape{1}, DType::f32);
  o.correct.resize(Shape{1}, DType::i32);
  o.total.resize(Shape{1}, DType::i32);
  return o;
}

}  // namespace oar::kernels
