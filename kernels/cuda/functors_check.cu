// kernels/cuda/functors_check.cu: the shared element-wise functors compiled for the device: one kernel that
// applies every unary functor, so a functor that is not host+device clean fails the CUDA build.
#include "kernels/functors.hpp"
// The op list alone (OAR_UNARY_OPS, no includes), as nvcc gets no ir headers.
#include "oar/ops/unary_list.hpp"

namespace oar::cuda_kernels {

template <class F>
__global__ void apply_unary(const float* x, float* y, int n, F f) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = f(x[i]) + f.grad(x[i], f(x[i]), 1.0f);
}

/// Instantiates the kernel for the functor of every op in OAR_UNARY_OPS, with the op's default attributes
/// as floats (a bool as 0 or 1), as the CPU kernels pass them (never launched on the host-only build machines).
void instantiate_functors(const float* x, float* y, int n) {
  if (n <= 0) return;
#define OAR_CHECK_FUNCTOR(kind, op_type, Functor, a0, d0, a1, d1) \
  apply_unary<<<(n + 255) / 256, 256>>>(x, y, n, fn::Functor{float(d0), float(d1)});
  OAR_UNARY_OPS(OAR_CHECK_FUNCTOR)
#undef OAR_CHECK_FUNCTOR
}

}  // namespace oar::cuda_kernels
