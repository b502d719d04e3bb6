// oar/ir/attribute.hpp: op attribute values, one alternative per Fluid AttrType (the variant index IS the AttrType).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "oar/core/error.hpp"

namespace oar {

/// A reference to a sub-block by index (AttrType BLOCK) and to several (BLOCKS).
struct BlockRef {
  int32_t idx = -1;
  friend bool operator==(const BlockRef&, const BlockRef&) = default;
};
struct BlockRefs {
  std::vector<int32_t> idx;
  friend bool operator==(const BlockRefs&, const BlockRefs&) = default;
};

/// Fluid's AttrType numbering; `Attribute::index()` equals these values.
enum class AttrType : int { INT = 0, FLOAT, STRING, INTS, FLOATS, STRINGS, BOOLEAN, BOOLEANS, BLOCK, LONG, BLOCKS, LONGS };

using Attribute = std::variant<int32_t, float, std::string, std::vector<int32_t>, std::vector<float>, std::vector<std::string>,
                               bool, std::vector<bool>, BlockRef, int64_t, BlockRefs, std::vector<int64_t>>;

inline AttrType attr_type(const Attribute& a) { return AttrType(a.index()); }

inline const char* attr_type_name(AttrType t) {
  static const char* names[] = {"int", "float", "string", "ints", "floats", "strings", "bool", "bools", "block", "long", "blocks", "longs"};
  return names[int(t)];
}

template <class T> struct attr_traits;
template <> struct attr_traits<int32_t> { static constexpr AttrType type = AttrType::INT; };
template <> struct attr_traits<float> { static constexpr AttrType type = AttrType::FLOAT; };
template <> struct attr_traits<std::string> { static constexpr AttrType type = AttrType::STRING; };
template <> struct attr_traits<std::vector<int32_t>> { static constexpr AttrType type = AttrType::INTS; };
template <> struct attr_traits<std::vector<float>> { static constexpr AttrType type = AttrType::FLOATS; };
template <> struct attr_traits<std::vector<std::string>> { static constexpr AttrType type = AttrType::STRINGS; };
template <> struct attr_traits<bool> { static constexpr AttrType type = AttrType::BOOLEAN; };
template <> struct attr_traits<std::vector<bool>> { static constexpr AttrType type = AttrType::BOOLEANS; };
template <> struct attr_traits<BlockRef> { static constexpr AttrType type = AttrType::BLOCK; };
template <> struct attr_traits<int64_t> { static constexpr AttrType type = AttrType::LONG; };
template <> struct attr_traits<BlockRefs> { static constexpr AttrType type = AttrType::BLOCKS; };
template <> struct attr_traits<std::vector<int64_t>> { static constexpr AttrType type = AttrType::LONGS; };

/// The name of an op's input or output slot: a `static constexpr` member of the op's struct (`Conv2d::filter`),
/// so that every use of a slot is checked by the compiler instead of being a string literal.
struct Slot {
  std::string_view name;
  /// A 64-bit FNV-1a hash of the name, computed by the compiler for the `static constexpr` slots: kernels find
  /// a slot among their op's resolved ones by this number, not by comparing strings on every run (a test
  /// checks that no two slot names of the registry share it).
  uint64_t key = hash("");

  static constexpr uint64_t hash(std::string_view s) {
    uint64_t h = 14695981039346656037ull;
    for (char ch : s) h = (h ^ uint64_t(uint8_t(ch))) * 1099511628211ull;
    return h;
  }
  constexpr Slot() = default;
  constexpr Slot(std::string_view n) : name(n), key(hash(n)) {}
  constexpr Slot(const char* n) : Slot(std::string_view(n)) {}
  Slot(const std::string& n) : Slot(std::string_view(n)) {}
  constexpr operator std::string_view() const { return name; }
  operator std::string() const { return std::string(name); }
  friend constexpr bool operator==(Slot a, Slot b) { return a.name == b.name; }
};

/// The name and C++ type of an op attribute (`Conv2d::strides` is an `Attr<std::vector<int32_t>>`): a
/// `static constexpr` member of the op's struct. Defaults live in the op's schema (`OpDef::attr`).
template <class T>
struct Attr {
  using type = T;
  std::string_view name;
  constexpr operator std::string_view() const { return name; }
  operator std::string() const { return std::string(name); }
};

/// Names the program itself gives meaning to, whatever the op: the ops that have them declare these same
/// constants, and the ir (Program::clone, prune, Operator::sub_block) reads them.
namespace common {
/// An op with `is_test` behaves for inference when it is true; `Program::clone(true)` sets it on every op.
inline constexpr Attr<bool> is_test{"is_test"};
/// A control-flow op's sub-block.
inline constexpr Attr<BlockRef> sub_block{"sub_block"};
/// The op types that move data in and out of a program (ops/feed_fetch.hpp); pruning drops them.
inline constexpr std::string_view feed_op = "feed", fetch_op = "fetch";
}  // namespace common

/// Converts a value of a convenient C++ type to the attribute alternative it is stored as
/// (int -> INT, double -> FLOAT, const char* -> STRING, initializer lists of ints -> INTS).
inline Attribute to_attribute(int v) { return int32_t(v); }
inline Attribute to_attribute(int64_t v) { return v; }
inline Attribute to_attribute(float v) { return v; }
inline Attribute to_attribute(double v) { return float(v); }
inline Attribute to_attribute(bool v) { return v; }
inline Attribute to_attribute(const char* v) { return std::string(v); }
inline Attribute to_attribute(std::string v) { return v; }
inline Attribute to_attribute(std::vector<int32_t> v) { return v; }
inline Attribute to_attribute(std::vector<int64_t> v) { return v; }
inline Attribute to_attribute(std::vector<float> v) { return v; }
inline Attribute to_attribute(std::vector<std::string> v) { return v; }
inline Attribute to_attribute(std::vector<bool> v) { return v; }
inline Attribute to_attribute(BlockRef v) { return v; }
inline Attribute to_attribute(BlockRefs v) { return v; }
inline Attribute to_attribute(Attribute v) { return v; }

inline std::string attr_str(const Attribute& a);

/// Reads an attribute as T. Integral and floating attributes convert among themselves (INT <-> LONG,
/// INTS <-> LONGS, INT -> FLOAT), because Fluid stores e.g. dims as INTS where oar prefers int64.
template <class T>
T attr_as(const Attribute& a, std::string_view name = {}) {
  if (auto* p = std::get_if<T>(&a)) return *p;
  if constexpr (std::is_same_v<T, int64_t>) {
    if (auto* p = std::get_if<int32_t>(&a)) return *p;
  } else if constexpr (std::is_same_v<T, int32_t>) {
    if (auto* p = std::get_if<int64_t>(&a)) return int32_t(*p);
  } else if constexpr (std::is_same_v<T, float>) {
    if (auto* p = std::get_if<int32_t>(&a)) return float(*p);
    if (auto* p = std::get_if<int64_t>(&a)) return float(*p);
  } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
    if (auto* p = std::get_if<std::vector<int32_t>>(&a)) return {p->begin(), p->end()};
  } else if constexpr (std::is_same_v<T, std::vector<int32_t>>) {
    if (auto* p = std::get_if<std::vector<int64_t>>(&a)) return {p->begin(), p->end()};
  }
  throw Error(fmt::format("attribute '{}' must be {}, got {} {}", name, attr_type_name(attr_traits<T>::type), attr_type_name(attr_type(a)), attr_str(a)));
}

/// "1", "0.5", "[1, 2]", "\"max\"", "block 1": the text form used by the printer.
inline std::string attr_str(const Attribute& a) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) return fmt::format("\"{}\"", v);
        else if constexpr (std::is_same_v<T, BlockRef>) return fmt::format("block {}", v.idx);
        else if constexpr (std::is_same_v<T, BlockRefs>) return fmt::format("blocks [{}]", fmt::join(v.idx, ", "));
        else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          std::string s = "[";
          for (size_t i = 0; i < v.size(); ++i) s += (i ? ", \"" : "\"") + v[i] + "\"";
          return s + "]";
        } else if constexpr (std::is_same_v<T, std::vector<bool>>) {
          std::string s = "[";
          for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::string(v[i] ? "true" : "false");
          return s + "]";
        } else if constexpr (std::is_same_v<T, bool>) return v ? "true" : "false";
        else if constexpr (std::is_arithmetic_v<T>) return fmt::format("{}", v);
        else return fmt::format("[{}]", fmt::join(v, ", "));
      },
      a);
}

}  // namespace oar
