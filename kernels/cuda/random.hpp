// kernels/cuda/random.hpp: eval_cuda of uniform_random, gaussian_random and truncated_gaussian_random
// (kernels/cuda/random.cu): the CPU's stream (kernels/random_counter.hpp) and seed rule, so a seeded op
// fills a tensor with the CPU's values.
#pragma once
#include "kernels/common/random.hpp"  // op_seed: the seed rule both devices share
#include "kernels/cuda/host.hpp"
#include "kernels/cuda/random_launch.hpp"
#include "oar/ops/random.hpp"

namespace oar::cuda_kernels {

/// Out sized by a random op's shape and dtype on the device, and the seed the op draws with (the CPU's rule).
template <class A>
std::pair<LoDTensor*, uint64_t> random_out(KernelContext& c, const A& a) {
  LoDTensor& o = c.out(ops::tensor_detail::RandomNames::out);
  (void)elem(c, a.dtype);  // an oar::Error for a dtype without a kernel, before anything is allocated
  o.resize(a.shape, a.dtype);
  o.clear_lod();
  return {&o, kernels::op_seed(c, a)};
}

inline void gaussian(KernelContext& c, const ops::tensor_detail::GaussianAttrs& a, bool truncated) {
  auto [o, seed] = random_out(c, a);
  check(c, gaussian_random(elem(c, a.dtype), o->raw(), o->numel(), seed, a.mean, a.std, truncated, stream(c)));
}

}  // namespace oar::cuda_kernels

namespace oar::ops {

inline void UniformRandom::eval_cuda(KernelContext& c, const Attrs& a) {
  auto [o, seed] = cuda_kernels::random_out(c, a);
  cuda_kernels::check(c, cuda_kernels::uniform_random(cuda_kernels::elem(c, a.dtype), o->raw(), o->numel(), seed, a.min, a.max, cuda_kernels::stream(c)));
}
inline void GaussianRandom::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::gaussian(c, a, false); }
inline void TruncatedGaussianRandom::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::gaussian(c, a, true); }

}  // namespace oar::ops
