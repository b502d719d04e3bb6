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

/// Runs `on_cuda` on cuda:0 and `on_cpu` (the same op, or its f32 form for a 16-bit case) on the CPU and compares
/// every output relative to its scale: |cuda - cpu| <= rtol (|cpu| + scale), scale being the CPU output's largest
/// magnitude. For results whose rounding follows the whole output's size, not each element's: 16-bit products,
/// and the FFT and Winograd convolutions a timed search may keep, whose transforms mix every term of a tile.
inline void compare_on_cuda_scaled(const OpTest& on_cuda, const OpTest& on_cpu, const std::string& what, double rtol) {
  CAPTURE(what);
  const auto want = on_cpu.run(cpu());
  if (!have_device()) {
    ++g_skipped;
    return;
  }
  const auto got = on_cuda.run(cuda(0));
  for (auto& [key, w] : want) {
    const LoDTensor& g = got.at(key);
    REQUIRE(g.shape() == w.shape());
    double scale = 0, worst = 0;
    for (int64_t i = 0; i < w.numel(); ++i) scale = std::max(scale, std::abs(w.get(i)));
    int64_t bad = 0;
    for (int64_t i = 0; i < w.numel(); ++i) {
      const double err = std::abs(g.get(i) - w.get(i));
      bad += err > rtol * (std::abs(w.get(i)) + scale);
      worst = std::max(worst, err);
    }
    CHECK_MESSAGE(bad == 0, what << " " << key << ": " << bad << " of " << w.numel() << " elements beyond the tolerance (worst error "
                                 << worst / scale << " of the scale " << scale << ")");
  }
}

/// Tolerances: f64 tight; f32 at a few ulps of the values involved (the device's transcendental functions and
/// summation order differ from the CPU's).
template <class T> constexpr double tol() { return std::is_same_v<T, double> ? 1e-12 : 2e-5; }

}  // namespace oar::test::cuda_check
