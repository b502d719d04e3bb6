// oar/layers/activations.hpp: the activations, usable both as `.act(oar::relu)` on a layer and as layers on
// their own (`oar::relu(x)`); on an expression (`oar::relu(a - b)`) they extend the expression instead.
#pragma once
#include "oar/layers/op_layer.hpp"

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

/// max(x, 0)
inline const ActivationFn relu{"relu"};
/// 1 / (1 + e^-x)
inline const ActivationFn sigmoid{"sigmoid"};
inline const ActivationFn tanh{"tanh"};
/// softmax over the last dim
inline const ActivationFn softmax{"softmax"};
inline const ActivationFn log_softmax{"log_softmax"};
/// x > 0 ? x : alpha x (alpha 0.02)
inline const ActivationFn leaky_relu{"leaky_relu"};
inline const ActivationFn elu{"elu"};
inline const ActivationFn gelu{"gelu"};
inline const ActivationFn softplus{"softplus"};
inline const ActivationFn softsign{"softsign"};
inline const ActivationFn swish{"swish"};
inline const ActivationFn relu6{"relu6"};
inline const ActivationFn hard_sigmoid{"hard_sigmoid"};
inline const ActivationFn exp{"exp"};
inline const ActivationFn log{"log"};
inline const ActivationFn sqrt{"sqrt"};
inline const ActivationFn abs{"abs"};
inline const ActivationFn square{"square"};
inline const ActivationFn reciprocal{"reciprocal"};

/// x^factor
inline Var pow(const Var& x, double factor, std::source_location loc = std::source_location::current()) {
  return record_unary_layer("pow", x, {{"factor", float(factor)}}, loc);
}
/// min(max(x, lo), hi)
inline Var clip(const Var& x, double lo, double hi, std::source_location loc = std::source_location::current()) {
  return record_unary_layer("clip", x, {{"min", float(lo)}, {"max", float(hi)}}, loc);
}

}  // namespace oar
