// oar/layers/initializers.hpp: parameter initializers with Fluid's formulas. Each one prepends one op to the
// startup program's global block that writes the parameter.
#pragma once
#include <cmath>

#include "oar/ops/registry.hpp"

namespace oar {

/// How a parameter starts: constant, uniform, normal, truncated normal, Xavier (Glorot) or MSRA (Kaiming).
struct Initializer {
  enum class Kind { constant, uniform, normal, truncated_normal, xavier_uniform, xavier_normal, msra_uniform, msra_normal } kind = Kind::constant;
  double a = 0, b = 0;  ///< constant: value; uniform: low, high; normal: mean, std
  int seed = 0;         ///< 0: the startup program's seed source
  int64_t fan_in = 0, fan_out = 0;  ///< Xavier/MSRA overrides (0: computed from the shape)

  /// "xavier_uniform", "constant(0)", "normal(0, 0.01)": the form stored in ParamInfo and printed.
  std::string str() const {
    switch (kind) {
      case Kind::constant: return fmt::format("constant({})", a);
      case Kind::uniform: return fmt::format("uniform({}, {})", a, b);
      case Kind::normal: return fmt::format("normal({}, {})", a, b);
      case Kind::truncated_normal: return fmt::format("truncated_normal({}, {})", a, b);
      case Kind::xavier_uniform: return "xavier_uniform";
      case Kind::xavier_normal: return "xavier_normal";
      case Kind::msra_uniform: return "msra_uniform";
      case Kind::msra_normal: return "msra_normal";
    }
    return "?";
  }

  /// Fluid's fans: rank 1 -> (s0, s0); rank 2 -> (s0, s1); rank >= 3 (conv filter [M, C, kh, kw]) ->
  /// (C * kh * kw, M * kh * kw).
  static std::pair<double, double> fans(const Shape& s) {
    if (s.rank() == 0) return {1, 1};
    if (s.rank() == 1) return {double(s[0]), double(s[0])};
    if (s.rank() == 2) return {double(s[0]), double(s[1])};
    double rf = double(s.numel(2, s.rank()));
    return {double(s[1]) * rf, double(s[0]) * rf};
  }

  /// Prepends the init op for `var` (already in `startup`'s global block) to `startup`.
  void emit(Program& startup, const Variable& var) const {
    Operator op;
    auto [fin, fout] = fans(var.shape());
    if (fan_in) fin = double(fan_in);
    if (fan_out) fout = double(fan_out);
    std::vector<int64_t> shape(var.shape().begin(), var.shape().end());
    auto random = [&](const char* type, const char* k0, double v0, const char* k1, double v1) {
      op = Operator(type);
      op.set_attr(k0, float(v0)).set_attr(k1, float(v1)).set_attr("seed", seed);
    };
    switch (kind) {
      case Kind::constant: op = Operator("fill_constant"); op.set_attr("value", float(a)); break;
      case Kind::uniform: random("uniform_random", "min", a, "max", b); break;
      case Kind::normal: random("gaussian_random", "mean", a, "std", b); break;
      case Kind::truncated_normal: random("truncated_gaussian_random", "mean", a, "std", b); break;
      case Kind::xavier_uniform: { double l = std::sqrt(6.0 / (fin + fout)); random("uniform_random", "min", -l, "max", l); break; }
      case Kind::xavier_normal: random("gaussian_random", "mean", 0.0, "std", std::sqrt(2.0 / (fin + fout))); break;
      case Kind::msra_uniform: { double l = std::sqrt(6.0 / fin); random("uniform_random", "min", -l, "max", l); break; }
      case Kind::msra_normal: random("gaussian_random", "mean", 0.0, "std", std::sqrt(2.0 / fin)); break;
    }
    op.set_attr("shape", shape).set_attr("dtype", int32_t(var.dtype()));
    op.set_output("Out", {var.name()});
    validate_op(op);
    startup.global_block().prepend_op(std::move(op));
  }
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
