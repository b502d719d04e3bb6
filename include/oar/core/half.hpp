// oar/core/half.hpp: the two 16-bit float types and their conversions to and from f32, the same code on the
// host and in CUDA kernels (so it includes nothing nvcc cannot read), rounding to nearest even as the
// hardware's conversions do.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "oar/config.hpp"

namespace oar {

/// Storage types of the two 16-bit floats: their bit patterns (IEEE binary16; bfloat16 is the top half of an
/// f32). Kernels compute in f32 and convert with to_float / from_float.
struct half { uint16_t bits; };
struct bfloat16 { uint16_t bits; };

namespace half_detail {
OAR_HD inline uint32_t bits_of(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return u;
}
OAR_HD inline float float_of(uint32_t u) {
  float x;
  memcpy(&x, &u, 4);
  return x;
}
}  // namespace half_detail

/// The f32 value of an f16 (exact: every f16 is an f32).
OAR_HD inline float to_float(half h) {
  using namespace half_detail;
  const uint32_t sign = uint32_t(h.bits & 0x8000u) << 16, exp = (h.bits >> 10) & 0x1fu, mant = h.bits & 0x3ffu;
  if (exp == 0x1f) return float_of(sign | 0x7f800000u | (mant << 13));  // inf, NaN (payload kept)
  if (exp == 0) {                                                       // zero or subnormal: mant * 2^-24, exact in f32
    const float v = float(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return float_of(sign | ((exp + 112) << 23) | (mant << 13));
}

/// The f32 value of a bfloat16 (exact).
OAR_HD inline float to_float(bfloat16 b) { return half_detail::float_of(uint32_t(b.bits) << 16); }

/// x rounded to the nearest f16 (ties to even); beyond the largest f16 (65504) it is +-inf, NaN stays NaN.
OAR_HD inline half to_half(float x) {
  using namespace half_detail;
  const uint32_t f = bits_of(x), sign = (f >> 16) & 0x8000u, a = f & 0x7fffffffu;
  if (a >= 0x7f800000u) return {uint16_t(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u))};
  if (a >= 0x477ff000u) return {uint16_t(sign | 0x7c00u)};  // rounds past 65504
  const uint32_t e = a >> 23;
  if (e < 113) {  // below 2^-14: an f16 subnormal in units of 2^-24, or zero
    if (e < 102) return {uint16_t(sign)};
    const uint32_t m = (a & 0x7fffffu) | 0x800000u, shift = 126 - e, q = m >> shift, rem = m & ((1u << shift) - 1), tie = 1u << (shift - 1);
    return {uint16_t(sign | (q + (rem > tie || (rem == tie && (q & 1u)))))};
  }
  const uint32_t h = (a >> 13) - (112u << 10), rem = a & 0x1fffu;  // a carry out of the mantissa bumps the exponent
  return {uint16_t(sign | (h + (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))))};
}

/// x rounded to the nearest bfloat16 (ties to even); NaN stays a (quiet) NaN.
OAR_HD inline bfloat16 to_bfloat16(float x) {
  const uint32_t f = half_detail::bits_of(x);
  if ((f & 0x7fffffffu) > 0x7f800000u) return {uint16_t((f >> 16) | 0x40u)};
  return {uint16_t((f + 0x7fffu + ((f >> 16) & 1u)) >> 16)};
}

template <class T> inline constexpr bool is_half_v = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

/// The type kernels compute in for elements of T: f32 for the 16-bit floats, T itself otherwise.
template <class T> using compute_t = std::conditional_t<is_half_v<T>, float, T>;

/// A compute-type value stored as T.
template <class T> OAR_HD inline T from_float(compute_t<T> v) {
  if constexpr (std::is_same_v<T, half>) return to_half(v);
  else if constexpr (std::is_same_v<T, bfloat16>) return to_bfloat16(v);
  else return v;
}
/// T's value in its compute type.
template <class T> OAR_HD inline compute_t<T> to_compute(T v) {
  if constexpr (is_half_v<T>) return to_float(v);
  else return v;
}

}  // namespace oar
