// tests/cuda/device.cpp: the CUDA backend links, reports its devices, and a device context creates its
// handles; the cases skip, saying so, when no device is found.
#include <doctest/doctest.h>

#include <oar/device/cuda.hpp>

TEST_CASE("cuda: the backend links and reports its devices") {
  const int n = oar::cuda_device_count();
  CHECK(n >= 0);
  if (n == 0) {
    MESSAGE("no CUDA device: skipped");
    return;
  }
  MESSAGE("CUDA devices: " << n);
  oar::CudaContext ctx(0);
  CHECK(ctx.stream() != nullptr);
  CHECK(ctx.cublas() != nullptr);
  CHECK(ctx.cudnn() != nullptr);
  ctx.synchronize();
}

TEST_CASE("cuda: TF32 is off until set_cuda_tf32(true), and can be turned off again") {
  CHECK_FALSE(oar::cuda_tf32());
  oar::set_cuda_tf32(true);
  CHECK(oar::cuda_tf32());
  oar::set_cuda_tf32(false);
  CHECK_FALSE(oar::cuda_tf32());
}
