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

/// An activation object with typed options, `Self` deriving from it (`GeluFn`): its setters return `Self`, so
/// options chain (`oar::softplus.beta(2).threshold(10)`), and `.with` keeps the type too.
template <class Self, class Op>
struct TypedActivationFn : ActivationFn {
  explicit TypedActivationFn(std::string t) : ActivationFn(std::move(t)) {}
  template <class V>
  Self with(const std::string& key, V v) const {
    Self f = static_cast<const Self&>(*this);
    f.attrs[key] = to_attribute(std::move(v));
    return f;
  }

 protected:
  /// A copy with attribute `a` of the op set to `v`.
  template <class T>
  Self set(Attr<T> a, T v) const {
    Self f = static_cast<const Self&>(*this);
    f.attrs[std::string(a.name)] = v;
    return f;
  }
};

/// x Phi(x), Phi the standard normal CDF (the exact, erf form); `oar::gelu.approximate()` is the tanh
/// approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Paddle's and BERT's `approximate`).
struct GeluFn : TypedActivationFn<GeluFn, ops::GeluOp> {
  using TypedActivationFn::TypedActivationFn;
  GeluFn approximate(bool on = true) const { return set(ops::GeluOp::param0, on); }
};

/// log(1 + e^(beta x)) / beta (beta 1), and x itself where beta x > threshold (threshold 20), as Paddle's
/// softplus: `oar::softplus.beta(2).threshold(10)`.
struct SoftplusFn : TypedActivationFn<SoftplusFn, ops::SoftplusOp> {
  using TypedActivationFn::TypedActivationFn;
  /// beta must not be 0 (the result is divided by it).
  SoftplusFn beta(double b, std::source_location loc = std::source_location::current()) const {
    if (b == 0) throw Error("softplus: beta must be nonzero (softplus is log(1 + e^(beta x)) / beta), got 0", Origin(loc, "softplus.beta"));
    return set(ops::SoftplusOp::param0, float(b));
  }
  SoftplusFn threshold(double t) const { return set(ops::SoftplusOp::param1, float(t)); }
};

/// The type of the activation object of unary op `Op`: ActivationFn, or the typed one of an op that has it.
template <class Op> struct activation_object { using type = ActivationFn; };
template <> struct activation_object<ops::GeluOp> { using type = GeluFn; };
template <> struct activation_object<ops::SoftplusOp> { using type = SoftplusFn; };

// The element-wise activations, generated: `inline const ActivationFn relu{"relu"};` for each `fusable` or
// `activation` row of OAR_UNARY_OPS (ops/unary_list.hpp; the comment on a row is its doc), of the type
// activation_object names. The fusable ones also extend an expression (layers/expr.hpp); attributes are
// changed with the typed setters or `.with("alpha", 0.5)`.
#define OAR_ACTIVATION_FN(kind, op_type, Functor, ...) \
  OAR_UNARY_IF_ACTIVATION(kind, inline const activation_object<ops::Functor##Op>::type op_type{#op_type};)
OAR_UNARY_OPS(OAR_ACTIVATION_FN)
#undef OAR_ACTIVATION_FN

// The `function` rows of OAR_UNARY_OPS: layer functions taking the attributes as arguments.
/// x^factor
inline Var pow(const Var& x, double factor, std::source_location loc = std::source_location::current()) {
  using P = ops::PowOp;
  return record_unary_layer(P::type, x, {{std::string(P::param0.name), float(factor)}}, loc);
}
/// min(max(x, lo), hi)
inline Var clip(const Var& x, double lo, double hi, std::source_location loc = std::source_location::current()) {
  using C = ops::ClipOp;
  return record_unary_layer(C::type, x, {{std::string(C::param0.name), float(lo)}, {std::string(C::param1.name), float(hi)}}, loc);
}

}  // namespace oar
