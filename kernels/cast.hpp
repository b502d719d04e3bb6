// kernels/cast.hpp: one element converted from one dtype to another, the same on the CPU and in CUDA kernels
// (the cast op on both places): float -> integer truncates toward zero and saturates at the integer's range
// (NaN -> 0), anything -> bool is x != 0, and the 16-bit floats convert through f32.
#pragma once
#include <limits>
#include <type_traits>

#include "oar/config.hpp"
#include "oar/core/half.hpp"

namespace oar::fn {

template <class From, class To>
OAR_HD inline To cast_value(From v) {
  if constexpr (is_half_v<From>) {
    return cast_value<float, To>(to_float(v));
  } else if constexpr (is_half_v<To>) {
    // f64 rounds to f32 first: a double exactly between two f16 neighbours after that rounding is rare enough
    // not to carry a second conversion path for.
    return from_float<To>(static_cast<float>(v));
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    // a plain conversion of an out-of-range or NaN value is undefined behaviour
    constexpr From lo = From(std::numeric_limits<To>::min()), hi = From(std::numeric_limits<To>::max());
    return v != v ? To(0) : v <= lo ? std::numeric_limits<To>::min() : v >= hi ? std::numeric_limits<To>::max() : static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace oar::fn
