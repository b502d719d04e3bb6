// tests/cuda/compare.hpp: what every CUDA-against-CPU test file shares: whether a device is present, the count
// of comparisons skipped without one, and compare_on_cuda, which runs an op harness case on both places.
#pragma once
#include <doctest/doctest.h>

#include <string>
#include <type_traits>

#include "support/op_check.hpp"

namespace oar::test::cuda_check {

inline bool have_device() { return cuda_device_count() > 0; }

inline int g_skipped = 0;  // comparisons left out for want of a device, over every file

/// Runs `t` on the CPU and on cuda:0 and compares every output (|cuda - cpu| <= atol + rtol |cpu|). Without a
/// device the CPU run alone still checks that the case is well formed (the op, its inputs and attributes).
inline void compare_on_cuda(const OpTest& t, const std::string& what, double atol, double rtol) {
  CAPTURE(what);
  const auto cpu_out = t.run(cpu());
  REQUIRE(!cpu_out.empty());
  if (!have_device()) {
    ++g_skipped;
    return;
  }
  const auto gpu_out = t.run(cuda(0));
  REQUIRE(cpu_out.size() == gpu_out.size());
  for (auto& [key, want] : cpu_out) {
    const LoDTensor& got = gpu_out.at(key);
    CHECK_MESSAGE(got.place().is_cpu(), what << ": " << key << " was not fetched to the host");
    CHECK_MESSAGE(got.dtype() == want.dtype(), what << ": " << key << " dtype");
    check_close(got, want, atol, rtol, what + " " + key);
  }
}

/// Tolerances: f64 tight; f32 at a few ulps of the values involved (the device's transcendental functions and
/// summation order differ from the CPU's).
template <class T> constexpr double tol() { return std::is_same_v<T, double> ? 1e-12 : 2e-5; }

}  // namespace oar::test::cuda_check
