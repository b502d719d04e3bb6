// kernels/common/random.hpp: the seed a random op draws with, one rule for every place, so that a seeded op
// fills a tensor with the same values on the CPU and on a GPU.
#pragma once
#include <cstdint>

#include "oar/ops/random.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// The op's `seed` attribute when it is not 0, else the next seed of the device's stream.
inline uint64_t op_seed(const KernelContext& c, const ops::tensor_detail::RandomAttrs& a) {
  return a.seed != 0 ? uint64_t(uint32_t(a.seed)) : c.device().next_seed();
}

}  // namespace oar::kernels
