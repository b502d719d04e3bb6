// oar/layers/activations.hpp: the activations, usable both as `.act(oar::relu)` on a layer and as layers on
// their own (`oar::relu(x)`); on an expression (`oar::relu(a - b)`) they extend the expression instead.
#pragma once
#include "oar/layers/op_layer.hpp"
#include "oar/ops/elementwise.hpp"

namespace oar {

/// An activation that is also callable: `relu(x)` records a relu layer.
struct ActivationFn : Activation {
  ActivationFn(std::string t, std::map<std::string, Attribute> a = {}) : Activation{std::move(t), std::move(a)} {}
  /// The same activation with one attribute changed: `oar::leaky_relu.with("alpha", 0.1)`.
  template <class V>
  ActivationFn with(const std::string& key, V v) const {
    ActivationFn f = *this;
    f.attrs[key] = to_attribute(std::move(v));
    return f;
  }
  Var operator()(const Var& x, std::source_location loc = std::source_location::current()) const {
    return record_unary_layer(type, x, attrs, loc);
  }
  /// On an expression: extends it (layers/expr.hpp).
  template <class E> requires expr::is_expr<E>::value
  auto operator()(const E& e) const;
};

/// softmax over the last dim
inline const ActivationFn softmax{"softmax"};
inline const ActivationFn log_softmax{"log_softmax"};

// The element-wise activations, generated: `inline const ActivationFn relu{"relu"};` for each `fusable` or
// `activation` row of OAR_UNARY_OPS (ops/unary_list.hpp; the comment on a row is its doc). The fusable ones
// also extend an expression (layers/expr.hpp); the others have attributes, changed with `.with`.
#define OAR_ACTIVATION_FN(kind, op_type, ...) OAR_UNARY_IF_ACTIVATION(kind, inline const ActivationFn op_type{#op_type};)
OAR_UNARY_OPS(OAR_ACTIVATION_FN)
#undef OAR_ACTIVATION_FN

// The `function` rows of OAR_UNARY_OPS: layer functions taking the attributes as arguments.
/// x^factor
inline Var pow(const Var& x, double factor, std::source_location loc = std::source_location::current()) {
  return record_unary_layer("pow", x, {{"factor", float(factor)}}, loc);
}
/// min(max(x, lo), hi)
inline Var clip(const Var& x, double lo, double hi, std::source_location loc = std::source_location::current()) {
  return record_unary_layer("clip", x, {{"min", float(lo)}, {"max", float(hi)}}, loc);
}

}  // namespace oar
