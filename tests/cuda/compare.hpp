// tests/cuda/compare.hpp: what every CUDA-against-CPU test file shares: whether a device is present, the count
// of comparisons skipped without one, and compare_on_cuda, which runs an op harness case on both places.
#pragma once
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <type_traits>

#include "support/op_check.hpp"

namespace oar::test::cuda_check {

inline bool have_device() { return cuda_device_count() > 0; }

inline int g_skipped = 0;  // comparisons left out for want of a device, over every file

inline int g_probed = 0;  // f32 cases whose tolerance was checked against the CPU's own f32 error

/// An f32 case's tolerance must leave the device room for its own rounding: the CPU's f32 error, measured against
/// the same case widened to f64, may use at most half of it. The device's error is of the same kind (summation
/// order, expf, FFT or Winograd rounding) and |cuda - cpu| is bounded by the two errors' sum, so a tolerance the
/// CPU alone nearly fills would fail on a GPU for no fault of the kernel. This is the only evidence about the f32
/// tolerances that a machine without a device can give. Cases with tolerance 0 claim the CPU's exact order of
/// operations instead; ops that take f32 only (cast with in_dtype, loss scaling) have no f64 form and are left out.
template <class Map>
void check_f32_margin(const Map& cpu_out, const Map& exact, const std::string& what, double atol, double rtol) {
  ++g_probed;
  for (auto& [key, got] : cpu_out) {
    auto it = exact.find(key);
    if (it == exact.end() || !got.initialized() || it->second.numel() != got.numel()) continue;
    double worst = 0;
    int64_t at = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double x = got.get(i), y = it->second.get(i);
      if (std::isnan(x) || std::isnan(y)) continue;
      const double used = std::abs(x - y) / (atol + rtol * std::abs(y));
      if (used > worst) worst = used, at = i;
    }
    CHECK_MESSAGE(worst <= 0.5, what << " " << key << ": the CPU's f32 error alone uses " << worst << " of the tolerance (element " << at << ": "
                                     << got.get(at) << ", in f64 " << it->second.get(at) << ")");
  }
}

inline void check_f32_margin(const OpTest& t, const std::map<std::string, LoDTensor>& cpu_out, const std::string& what, double atol, double rtol) {
  std::map<std::string, LoDTensor> exact;
  try {
    exact = t.widened().run(cpu());
  } catch (const Error&) {
    return;
  }
  check_f32_margin(cpu_out, exact, what, atol, rtol);
}

/// Runs `t` on the CPU and on cuda:0 and compares every output (|cuda - cpu| <= atol + rtol |cpu|). Without a
/// device the CPU run alone still checks that the case is well formed (the op, its inputs and attributes).
inline void compare_on_cuda(const OpTest& t, const std::string& what, double atol, double rtol) {
  CAPTURE(what);
  const auto cpu_out = t.run(cpu());
  REQUIRE(!cpu_out.empty());
  if (t.has_f32_input() && (atol > 0 || rtol > 0)) check_f32_margin(t, cpu_out, what, atol, rtol);
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
