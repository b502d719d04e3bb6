// kernels/cuda/random.hpp: eval_cuda of uniform_random, gaussian_random and truncated_gaussian_random
// (kernels/cuda/random.cu): the CPU's stream (kernels/random_counter.hpp) and seed rule, so a seeded op
// fills a tensor with the CPU's values.
#pragma once
#include "kernels/cpu/random.hpp"  // op_seed: the seed rule both devices share
#include "kernels/cuda/host.hpp"
#include "oar/ops/random.hpp"

namespace oar::ops {

inline void UniformRandom::eval_cuda(KernelContext& c, const Attrs& a) {
  LoDTensor& o = c.out(out);
  const cuda_kernels::Elem t = cuda_kernels::elem(c, a.dtype);
  o.resize(a.shape, a.dtype);
  o.clear_lod();
  cuda_kernels::check(c, cuda_kernels::uniform_random(t, o.raw(), o.numel(), cpu_kernels::op_seed(c, a), a.min, a.max, cuda_kernels::stream(c)));
}

inline void GaussianRandom::eval_cuda(KernelContext& c, const Attrs& a) {
  LoDTensor& o = c.out(out);
  const cuda_kernels::Elem t = cuda_kernels::elem(c, a.dtype);
  o.resize(a.shape, a.dtype);
  o.clear_lod();
  cuda_kernels::check(c, cuda_kernels::gaussian_random(t, o.raw(), o.numel(), cpu_kernels::op_seed(c, a), a.mean, a.std, false, cuda_kernels::stream(c)));
}

inline void TruncatedGaussianRandom::eval_cuda(KernelContext& c, const Attrs& a) {
  LoDTensor& o = c.out(out);
  const cuda_kernels::Elem t = cuda_kernels::elem(c, a.dtype);
  o.resize(a.shape, a.dtype);
  o.clear_lod();
  cuda_kernels::check(c, cuda_kernels::gaussian_random(t, o.raw(), o.numel(), cpu_kernels::op_seed(c, a), a.mean, a.std, true, cuda_kernels::stream(c)));
}

}  // namespace oar::ops
