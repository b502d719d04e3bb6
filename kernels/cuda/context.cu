// kernels/cuda/context.cu: device discovery for the CUDA backend. No fmt here (see toolchain notes).
#include <cuda_runtime.h>

#include "kernels/functors.hpp"
#include "oar/runtime/cuda.hpp"

namespace oar::cuda {

/// Number of usable CUDA devices; 0 when there is no driver or no GPU.
int device_count() {
  int n = 0;
  // NOTE: without a driver cudaGetDeviceCount fails and leaves n untouched; clear the sticky error.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace oar::cuda
