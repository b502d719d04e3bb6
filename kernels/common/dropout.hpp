// kernels/common/dropout.hpp: the checks, the mask's seed and the outputs dropout's kernels on every place start
// from.
#pragma once
#include <cstdint>

#include "oar/ops/dropout.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// What dropout's kernels on every place start from: dropout_prob checked, the seed of this run's mask (drawn
/// under is_test too), and Mask (null when not asked for).
struct DropoutPlan {
  uint64_t seed;
  LoDTensor* mask;
};
inline DropoutPlan dropout_plan(const KernelContext& c, const ops::Dropout::Attrs& a) {
  const double p = a.dropout_prob;
  c.check(p >= 0 && p <= 1, "dropout_prob = {} must be in [0, 1]", p);
  const uint64_t seed = a.fix_seed ? uint64_t(uint32_t(a.seed)) : c.device().next_seed();
  return {seed, c.out_if(ops::Dropout::mask)};
}

/// The same for the gradient: Mask, Out@GRAD checked against it, and X@GRAD (not resized).
struct DropoutGradPlan {
  const LoDTensor &mask, &out_grad;
  LoDTensor& x_grad;
};
inline DropoutGradPlan dropout_grad_plan(const KernelContext& c) {
  using D = ops::Dropout;
  const LoDTensor& mask_t = c.in(D::mask);
  const LoDTensor& dout = c.in(D::out_grad);
  LoDTensor& dx = c.out(D::x_grad);
  c.check(dout.shape() == mask_t.shape(), "Out@GRAD {} does not match Mask {}", dout.shape(), mask_t.shape());
  return {mask_t, dout, dx};
}

}  // namespace oar::kernels
