// tests/cuda/device.cpp: the CUDA backend links, and its tests skip (saying so) when no device is found.
#include <doctest/doctest.h>

#include <oar/runtime/cuda.hpp>

TEST_CASE("cuda: the backend links and reports its devices") {
  int n = oar::cuda::device_count();
  CHECK(n >= 0);
  if (n == 0) {
    MESSAGE("no CUDA device: skipped");
    return;
  }
  MESSAGE("CUDA devices: " << n);
}
