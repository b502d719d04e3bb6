// kernels/cpu/scratch.hpp: the per-thread scratch buffers of kernels/common/scratch.hpp under the CPU kernels'
// namespace, where they are called unqualified.
#pragma once
#include "kernels/common/scratch.hpp"

namespace oar::cpu_kernels {
using kernels::thread_scratch;
}  // namespace oar::cpu_kernels
