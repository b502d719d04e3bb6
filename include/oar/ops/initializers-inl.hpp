// oar/ops/initializers-inl.hpp: the implementation of initializers.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/ops/initializers.hpp"

#include <cmath>

#include "oar/ops/fill_constant.hpp"
#include "oar/ops/random.hpp"
#include "oar/ops/registry.hpp"

namespace oar {

OAR_FUNC std::string Initializer::str() const {
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

OAR_FUNC std::pair<double, double> Initializer::fans(const Shape& s) {
  if (s.rank() == 0) return {1, 1};
  if (s.rank() == 1) return {double(s[0]), double(s[0])};
  if (s.rank() == 2) return {double(s[0]), double(s[1])};
  double rf = double(s.numel(2, s.rank()));
  return {double(s[1]) * rf, double(s[0]) * rf};
}

OAR_FUNC void Initializer::emit(Program& startup, const Variable& var) const {
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
  op.set_origin(var.origin());  // the layer that made the variable: where a failed initialisation (out of memory) points
  startup.global_block().prepend_op(std::move(op));
}

}  // namespace oar
