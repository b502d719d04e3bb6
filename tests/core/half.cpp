// tests/core/half.cpp: the f16 and bf16 conversions of core/half.hpp: known values and ties, every f16 round
// trip, and (where the CPU has F16C) agreement with the hardware's conversion over a sweep of f32 values.
#include "pch.hpp"

#include <cmath>
#include <cstring>
#include <immintrin.h>

#include <oar/core/half.hpp>

using namespace oar;

namespace {
uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
__attribute__((target("f16c"))) uint16_t hw_half(float x) { return _cvtss_sh(x, 0); }
__attribute__((target("f16c"))) float hw_float(uint16_t h) { return _cvtsh_ss(h); }
}  // namespace

TEST_CASE("half: known values, ties to even, overflow, subnormals, NaN") {
  CHECK(to_half(1.f).bits == 0x3c00);
  CHECK(to_half(-2.f).bits == 0xc000);
  CHECK(to_half(65504.f).bits == 0x7bff);
  CHECK(to_half(65519.f).bits == 0x7bff);  // below the midpoint to 65536
  CHECK(to_half(65520.f).bits == 0x7c00);  // the midpoint rounds to even: inf
  CHECK(to_half(std::ldexp(1.f, -24)).bits == 0x0001);
  CHECK(to_half(std::ldexp(1.f, -25)).bits == 0x0000);      // a tie between 0 and the smallest subnormal: even
  CHECK(to_half(std::ldexp(3.f, -25)).bits == 0x0002);      // a tie between 1 and 2 subnormal units: even
  CHECK(to_half(1.f + std::ldexp(1.f, -11)).bits == 0x3c00);  // a tie: even
  CHECK(to_half(1.f + std::ldexp(3.f, -11)).bits == 0x3c02);
  CHECK(to_half(-0.f).bits == 0x8000);
  CHECK(std::isnan(to_float(to_half(NAN))));
  CHECK(to_float(half{0x7c00}) == INFINITY);
  CHECK(to_float(half{0x0001}) == std::ldexp(1.f, -24));
  CHECK(to_float(half{0x3555}) == doctest::Approx(0.333251953125));

  CHECK(to_bfloat16(1.f).bits == 0x3f80);
  CHECK(to_bfloat16(from_bits(0x3f808000)).bits == 0x3f80);  // a tie: even
  CHECK(to_bfloat16(from_bits(0x3f818000)).bits == 0x3f82);  // a tie: even
  CHECK(to_bfloat16(from_bits(0x3f808001)).bits == 0x3f81);
  CHECK(to_bfloat16(from_bits(0x7f7fffff)).bits == 0x7f80);  // rounds past the largest: inf
  CHECK(std::isnan(to_float(to_bfloat16(NAN))));
  CHECK(to_float(bfloat16{0x4049}) == 3.140625f);
}

TEST_CASE("half: every f16 survives f16 -> f32 -> f16, and both conversions agree with F16C where the CPU has it") {
  const bool hw = __builtin_cpu_supports("f16c");
  if (!hw) MESSAGE("no F16C on this CPU: the hardware comparison is skipped");
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = to_float(half{uint16_t(h)});
    if (std::isnan(f)) {
      bad += (h & 0x7c00) != 0x7c00;
      continue;
    }
    bad += to_half(f).bits != h;
    if (hw) bad += bits(hw_float(uint16_t(h))) != bits(f);
  }
  CHECK(bad == 0);
  if (!hw) return;
  int64_t diff = 0;
  for (uint64_t u = 0; u < (1ull << 32); u += 9973) {
    const float x = from_bits(uint32_t(u));
    if (!std::isnan(x)) diff += to_half(x).bits != hw_half(x);
  }
  for (uint32_t u = 0x33000000u; u < 0x38900000u; u += 7) diff += to_half(from_bits(u)).bits != hw_half(from_bits(u));  // subnormals
  CHECK(diff == 0);
}

TEST_CASE("bfloat16: rounding to nearest even over a sweep of f32 values") {
  int64_t bad = 0;
  for (uint64_t u = 0; u < (1ull << 32); u += 10007) {
    const uint32_t v = uint32_t(u);
    const float x = from_bits(v);
    if (std::isnan(x) || (v & 0x7fffffffu) >= 0x7f7f8000u) continue;  // NaN, and the top that rounds to inf
    const uint32_t lo = v & 0xffff0000u, hi = lo + 0x10000u;
    const double dl = std::fabs(double(x) - from_bits(lo)), dh = std::fabs(double(from_bits(hi)) - x);
    const uint16_t want = (dl < dh || (dl == dh && ((lo >> 16) & 1u) == 0)) ? uint16_t(lo >> 16) : uint16_t(hi >> 16);
    bad += to_bfloat16(x).bits != want;
  }
  CHECK(bad == 0);
}
