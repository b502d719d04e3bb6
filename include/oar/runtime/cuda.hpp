// oar/runtime/cuda.hpp: what host code may ask of the CUDA backend (kernels/cuda/, built only with
// OAR_WITH_CUDA): how many devices there are. Without CUDA the answer is 0.
#pragma once
#include "oar/config.hpp"

namespace oar::cuda {

#if OAR_WITH_CUDA
/// Number of usable CUDA devices; 0 when there is no driver or no GPU (kernels/cuda/context.cu).
int device_count();
#else
inline int device_count() { return 0; }
#endif

}  // namespace oar::cuda
