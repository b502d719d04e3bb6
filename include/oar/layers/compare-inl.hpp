// oar/layers/compare-inl.hpp: the implementation of compare.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/compare.hpp"

#include "oar/layers/op_layer.hpp"
#include "oar/ops/assign.hpp"
#include "oar/ops/compare.hpp"

namespace oar {

namespace detail {
/// A two-input op with slots X, Y and a bool Out (it stops gradients: nothing differentiates a bool).
inline Var record_bool_layer(std::string_view type, const Var& x, const Var& y, std::source_location loc) {
  static_assert(ops::CompareOp::x == ops::LogicalBinaryOp::x && ops::CompareOp::y == ops::LogicalBinaryOp::y &&
                ops::CompareOp::out == ops::LogicalBinaryOp::out);
  using C = ops::CompareOp;
  return record_op_layer(std::string(type), type, {{std::string(C::x.name), {x}}, {std::string(C::y.name), {y}}}, {},
                         {{std::string(C::out.name), DType::boolean, true}}, loc)[0];
}
}  // namespace detail

OAR_FUNC Var less_than(const Var& x, const Var& y, std::source_location loc) { return detail::record_bool_layer(ops::LessThan::type, x, y, loc); }
OAR_FUNC Var less_equal(const Var& x, const Var& y, std::source_location loc) { return detail::record_bool_layer(ops::LessEqual::type, x, y, loc); }
OAR_FUNC Var greater_than(const Var& x, const Var& y, std::source_location loc) { return detail::record_bool_layer(ops::GreaterThan::type, x, y, loc); }
OAR_FUNC Var greater_equal(const Var& x, const Var& y, std::source_location loc) { return detail::record_bool_layer(ops::GreaterEqual::type, x, y, loc); }
OAR_FUNC Var equal(const Var& x, const Var& y, std::source_location loc) { return detail::record_bool_layer(ops::Equal::type, x, y, loc); }
OAR_FUNC Var not_equal(const Var& x, const Var& y, std::source_location loc) { return detail::record_bool_layer(ops::NotEqual::type, x, y, loc); }
OAR_FUNC Var logical_and(const Var& x, const Var& y, std::source_location loc) { return detail::record_bool_layer(ops::LogicalAnd::type, x, y, loc); }
OAR_FUNC Var logical_or(const Var& x, const Var& y, std::source_location loc) { return detail::record_bool_layer(ops::LogicalOr::type, x, y, loc); }
OAR_FUNC Var logical_xor(const Var& x, const Var& y, std::source_location loc) { return detail::record_bool_layer(ops::LogicalXor::type, x, y, loc); }
OAR_FUNC Var logical_not(const Var& x, std::source_location loc) {
  using N = ops::LogicalNot;
  return record_op_layer(std::string(N::type), N::type, {{std::string(N::x.name), {x}}}, {}, {{std::string(N::out.name), DType::boolean, true}}, loc)[0];
}

OAR_FUNC Var increment(const Var& x, double step, std::source_location loc) {
  using I = ops::Increment;
  return record_op_layer(std::string(I::type), I::type, {{std::string(I::x.name), {x}}}, {{std::string(I::step.name), float(step)}},
                         {{std::string(I::out.name), std::nullopt, true}}, loc)[0];
}

}  // namespace oar
