// oar/ops/initializers.hpp: parameter initializers with Fluid's formulas. Each one prepends one op to the
// startup program's global block that writes the parameter.
#pragma once
#include <cmath>

#include "oar/ops/fill_constant.hpp"
#include "oar/ops/random.hpp"
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
    // Op `O` (an op struct passed as a value) writing `var`: every init op has Out, shape and dtype.
    auto init_op = [&](auto o) {
      using O = decltype(o);
      Operator r{std::string(O::type)};
      r.set_attr(O::shape, shape).set_attr(O::dtype, int32_t(var.dtype()));
      r.set_output(O::out, {var.name()});
      return r;
    };
    auto uniform = [&](double lo, double hi) {
      using U = ops::UniformRandom;
      op = init_op(U{});
      op.set_attr(U::min, float(lo)).set_attr(U::max, float(hi)).set_attr(U::seed, int32_t(seed));
    };
    auto gaussian = [&](auto o, double mean, double sd) {  // gaussian_random or truncated_gaussian_random
      using G = decltype(o);
      op = init_op(G{});
      op.set_attr(G::mean, float(mean)).set_attr(G::std, float(sd)).set_attr(G::seed, int32_t(seed));
    };
    switch (kind) {
      case Kind::constant: op = init_op(ops::FillConstant{}); op.set_attr(ops::FillConstant::value, float(a)); break;
      case Kind::uniform: uniform(a, b); break;
      case Kind::normal: gaussian(ops::GaussianRandom{}, a, b); break;
      case Kind::truncated_normal: gaussian(ops::TruncatedGaussianRandom{}, a, b); break;
      case Kind::xavier_uniform: { double l = std::sqrt(6.0 / (fin + fout)); uniform(-l, l); break; }
      case Kind::xavier_normal: gaussian(ops::GaussianRandom{}, 0.0, std::sqrt(2.0 / (fin + fout))); break;
      case Kind::msra_uniform: { double l = std::sqrt(6.0 / fin); uniform(-l, l); break; }
      case Kind::msra_normal: gaussian(ops::GaussianRandom{}, 0.0, std::sqrt(2.0 / fin)); break;
    }
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
