// tests/cuda/summary.cpp: how many CUDA-against-CPU comparisons the other files skipped. doctest runs cases in
// the order of their files' names, so this one, last by name, runs after them.
#include <doctest/doctest.h>

#include "cuda/compare.hpp"

using namespace oar::test::cuda_check;

TEST_CASE("cuda: how many CUDA-against-CPU comparisons ran") {
  MESSAGE(g_probed << " f32 cases had their tolerance checked against the CPU's own f32 error");
  CHECK(g_probed > 50);
  if (have_device()) return;
  MESSAGE("no CUDA device: " << g_skipped << " CUDA-against-CPU comparisons skipped (their CPU halves ran; the CUDA kernels are compiled and registered, not run)");
  CHECK(g_skipped > 100);
}
