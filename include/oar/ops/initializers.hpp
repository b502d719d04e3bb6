// oar/ops/initializers.hpp: parameter initializers with Fluid's formulas. Each one prepends one op to the
// startup program's global block that writes the parameter.
#pragma once
#include <string>
#include <utility>

#include "oar/config.hpp"
#include "oar/ir/program.hpp"

namespace oar {

/// How a parameter starts: constant, uniform, normal, truncated normal, Xavier (Glorot) or MSRA (Kaiming).
struct Initializer {
  enum class Kind { constant, uniform, normal, truncated_normal, xavier_uniform, xavier_normal, msra_uniform, msra_normal } kind = Kind::constant;
  double a = 0, b = 0;  ///< constant: value; uniform: low, high; normal: mean, std
  int seed = 0;         ///< 0: the startup program's seed source
  int64_t fan_in = 0, fan_out = 0;  ///< Xavier/MSRA overrides (0: computed from the shape)

  /// "xavier_uniform", "constant(0)", "normal(0, 0.01)": the form stored in ParamInfo and printed.
  std::string str() const;

  /// Fluid's fans: rank 1 -> (s0, s0); rank 2 -> (s0, s1); rank >= 3 (conv filter [M, C, kh, kw]) ->
  /// (C * kh * kw, M * kh * kw).
  static std::pair<double, double> fans(const Shape& s);

  /// Prepends the init op for `var` (already in `startup`'s global block) to `startup`.
  void emit(Program& startup, const Variable& var) const;
};

/// out = value
inline Initializer Constant(double value = 0) { return {Initializer::Kind::constant, value, 0}; }
/// out ~ U(low, high); Fluid's original default for weights was Uniform(-1, 1).
inline Initializer Uniform(double low = -1, double high = 1, int seed = 0) { return {Initializer::Kind::uniform, low, high, seed}; }
/// out ~ N(mean, std)
inline Initializer Normal(double mean = 0, double std = 1, int seed = 0) { return {Initializer::Kind::normal, mean, std, seed}; }
/// out ~ N(mean, std) truncated to mean +- 2 std
inline Initializer TruncatedNormal(double mean = 0, double std = 1, int seed = 0) { return {Initializer::Kind::truncated_normal, mean, std, seed}; }
/// uniform: U(-sqrt(6 / (fan_in + fan_out)), +...); normal: N(0, sqrt(2 / (fan_in + fan_out)))
inline Initializer Xavier(bool uniform = true, int64_t fan_in = 0, int64_t fan_out = 0, int seed = 0) {
  Initializer i{uniform ? Initializer::Kind::xavier_uniform : Initializer::Kind::xavier_normal, 0, 0, seed};
  i.fan_in = fan_in;
  i.fan_out = fan_out;
  return i;
}
/// uniform: U(-sqrt(6 / fan_in), +...); normal: N(0, sqrt(2 / fan_in)) (He et al.)
inline Initializer MSRA(bool uniform = true, int64_t fan_in = 0, int seed = 0) {
  Initializer i{uniform ? Initializer::Kind::msra_uniform : Initializer::Kind::msra_normal, 0, 0, seed};
  i.fan_in = fan_in;
  return i;
}
inline Initializer Kaiming(bool uniform = true, int64_t fan_in = 0, int seed = 0) { return MSRA(uniform, fan_in, seed); }

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/ops/initializers-inl.hpp"
#endif
