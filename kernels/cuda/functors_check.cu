// kernels/cuda/functors_check.cu: the shared element-wise functors compiled for the device: one kernel that
// applies every unary functor, so a functor that is not host+device clean fails the CUDA build.
#include "kernels/functors.hpp"

namespace oar::cuda {

template <class F>
__global__ void apply_unary(const float* x, float* y, int n, F f) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = f(x[i]) + f.grad(x[i], f(x[i]), 1.0f);
}

/// Instantiates the kernel for every functor (never launched on the host-only build machines).
void instantiate_functors(const float* x, float* y, int n) {
  if (n <= 0) return;
  apply_unary<<<(n + 255) / 256, 256>>>(x, y, n, fn::Relu{});
  apply_unary<<<(n + 255) / 256, 256>>>(x, y, n, fn::Sigmoid{});
  apply_unary<<<(n + 255) / 256, 256>>>(x, y, n, fn::Tanh{});
  apply_unary<<<(n + 255) / 256, 256>>>(x, y, n, fn::Gelu{});
  apply_unary<<<(n + 255) / 256, 256>>>(x, y, n, fn::LeakyRelu{0.02f, 0});
  apply_unary<<<(n + 255) / 256, 256>>>(x, y, n, fn::Softplus{});
  apply_unary<<<(n + 255) / 256, 256>>>(x, y, n, fn::Clip{-1, 1});
}

}  // namespace oar::cuda
