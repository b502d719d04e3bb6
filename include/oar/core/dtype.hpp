// oar/core/dtype.hpp: element types with Fluid's VarType.Type numbers, their sizes and names, and visit_dtype.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "oar/core/error.hpp"
#include "oar/core/half.hpp"  // the 16-bit float types

namespace oar {

/// Element type. The values are Fluid 1.x's `VarType.Type` numbers, so a saved TensorDesc reads the same in
/// both. Fluid 1.x has no bfloat16: oar uses 22, the number later Paddle releases gave BF16.
enum class DType : int32_t { boolean = 0, i16 = 1, i32 = 2, i64 = 3, f16 = 4, f32 = 5, f64 = 6, u8 = 20, i8 = 21, bf16 = 22 };

inline constexpr DType boolean = DType::boolean, i8 = DType::i8, u8 = DType::u8, i16 = DType::i16, i32 = DType::i32,
                       i64 = DType::i64, f16 = DType::f16, bf16 = DType::bf16, f32 = DType::f32, f64 = DType::f64;

constexpr size_t size_of(DType t) {
  switch (t) {
    case DType::boolean: case DType::u8: case DType::i8: return 1;
    case DType::i16: case DType::f16: case DType::bf16: return 2;
    case DType::i32: case DType::f32: return 4;
    case DType::i64: case DType::f64: return 8;
  }
  return 0;
}

constexpr std::string_view name(DType t) {
  switch (t) {
    case DType::boolean: return "bool";
    case DType::u8: return "u8";
    case DType::i8: return "i8";
    case DType::i16: return "i16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::f32: return "f32";
    case DType::f64: return "f64";
  }
  return "?";
}

constexpr bool is_valid_dtype(int v) {
  return (v >= 0 && v <= 6) || v == 20 || v == 21 || v == 22;
}
constexpr bool is_float(DType t) { return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16; }
constexpr bool is_integer(DType t) { return t == DType::i8 || t == DType::u8 || t == DType::i16 || t == DType::i32 || t == DType::i64; }

template <class T> struct dtype_traits;
template <> struct dtype_traits<bool> { static constexpr DType value = DType::boolean; };
template <> struct dtype_traits<uint8_t> { static constexpr DType value = DType::u8; };
template <> struct dtype_traits<int8_t> { static constexpr DType value = DType::i8; };
template <> struct dtype_traits<int16_t> { static constexpr DType value = DType::i16; };
template <> struct dtype_traits<int32_t> { static constexpr DType value = DType::i32; };
template <> struct dtype_traits<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_traits<half> { static constexpr DType value = DType::f16; };
template <> struct dtype_traits<bfloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_traits<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_traits<double> { static constexpr DType value = DType::f64; };

/// The DType of a C++ element type: dtype_of<float> == f32.
template <class T> inline constexpr DType dtype_of = dtype_traits<std::remove_cv_t<T>>::value;

template <class T> struct type_tag { using type = T; };

/// Calls `f(type_tag<T>{})` with the C++ type of `t`.
template <class F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::boolean: return f(type_tag<bool>{});
    case DType::u8: return f(type_tag<uint8_t>{});
    case DType::i8: return f(type_tag<int8_t>{});
    case DType::i16: return f(type_tag<int16_t>{});
    case DType::i32: return f(type_tag<int32_t>{});
    case DType::i64: return f(type_tag<int64_t>{});
    case DType::f16: return f(type_tag<half>{});
    case DType::bf16: return f(type_tag<bfloat16>{});
    case DType::f32: return f(type_tag<float>{});
    case DType::f64: return f(type_tag<double>{});
  }
  throw Error(fmt::format("invalid dtype value {}", int(t)));
}

}  // namespace oar

template <> struct fmt::formatter<oar::DType> : fmt::formatter<std::string_view> {
  auto format(oar::DType t, format_context& ctx) const { return fmt::formatter<std::string_view>::format(oar::name(t), ctx); }
};
