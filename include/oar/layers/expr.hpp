// oar/layers/expr.hpp: expression templates on Var. `a * b + c`, `relu(x - m)`, `2.0 * x` build a compile-time
// expression type; turning it into a Var records ONE fused_elementwise op holding the expression in postfix
// form (docs/expressions.md), evaluated in one pass over memory.
#pragma once
#include <type_traits>

#include "oar/layers/activations.hpp"
#include "oar/ops/elementwise.hpp"
#include "oar/ops/fused_elementwise.hpp"
#include "oar/tape/replay.hpp"

namespace oar {

namespace expr {

struct Leaf {
  Var v;
};
struct Const {
  double c;
};
template <class A, class B>
struct Bin {
  const char* op;
  A a;
  B b;
};
template <class A>
struct Un {
  std::string fn;
  A a;
};

template <class T> struct is_node : std::false_type {};
template <> struct is_node<Leaf> : std::true_type {};
template <> struct is_node<Const> : std::true_type {};
template <class A, class B> struct is_node<Bin<A, B>> : std::true_type {};
template <class A> struct is_node<Un<A>> : std::true_type {};

/// An expression: a tree of nodes whose shape is its C++ type.
template <class N>
struct Expr {
  N node;
};


/// What may appear in an expression: a Var (or a layer's typed result), an expression, or an arithmetic scalar.
template <class T>
concept Operand = std::is_base_of_v<Var, std::decay_t<T>> || is_expr<std::decay_t<T>>::value || std::is_arithmetic_v<std::decay_t<T>>;
template <class A, class B>
concept ExprOperands = Operand<A> && Operand<B> && !(std::is_arithmetic_v<std::decay_t<A>> && std::is_arithmetic_v<std::decay_t<B>>);

inline Leaf node_of(const Var& v) { return {v}; }
template <class N> N node_of(const Expr<N>& e) { return e.node; }
template <class T> requires std::is_arithmetic_v<T> Const node_of(T c) { return {double(c)}; }

template <class A, class B>
auto make_bin(const char* op, const A& a, const B& b) {
  auto na = node_of(a);
  auto nb = node_of(b);
  return Expr<Bin<decltype(na), decltype(nb)>>{{op, na, nb}};
}

/// Postfix emission: leaves get input indices (a Var used twice is one input).
struct Emitter {
  std::vector<Var> inputs;
  std::string tokens;
  void push(const std::string& t) { tokens += (tokens.empty() ? "" : " ") + t; }
  void emit(const Leaf& l) {
    size_t i = 0;
    while (i < inputs.size() && !(inputs[i] == l.v)) ++i;
    if (i == inputs.size()) inputs.push_back(l.v);
    push("x" + std::to_string(i));
  }
  void emit(const Const& c) { push(fmt::format("c:{}", c.c)); }
  template <class A, class B> void emit(const Bin<A, B>& b) {
    emit(b.a);
    emit(b.b);
    push(b.op);
  }
  template <class A> void emit(const Un<A>& u) {
    emit(u.a);
    push(u.fn);
  }
};

/// The postfix string and the inputs of an expression.
template <class N>
std::pair<std::string, std::vector<Var>> to_postfix(const Expr<N>& e) {
  Emitter em;
  em.emit(e.node);
  return {em.tokens, em.inputs};
}

/// Records the fused_elementwise op computing `e`.
template <class N>
Var record(const Expr<N>& e, std::source_location loc) {
  auto [postfix, inputs] = to_postfix(e);
  OAR_CHECK(!inputs.empty(), "an expression needs at least one Var");
  auto replay = [postfix](LayerHelper& h) {
    std::vector<std::string> xs;
    for (size_t i = 0; i < h.num_inputs(); ++i) xs.push_back(h.input(i));
    Variable& out = h.create_tmp(h.input_dtype());
    Operator op{std::string(ops::FusedElementwise::type)};
    op.set_input(ops::FusedElementwise::x, xs).set_output(ops::FusedElementwise::out, {out.name()}).set_attr(ops::FusedElementwise::expression, postfix);
    h.append_op(std::move(op));
    return std::vector<std::string>{out.name()};
  };
  return record_layer(std::string(ops::FusedElementwise::type), inputs, std::move(replay), loc)[0];
}

}  // namespace expr

// ---- operators. They live in oar::expr (found by ADL on expressions) and are re-declared in oar by
// using-declarations (found by ADL on Var), so user code needs no using-directive.
namespace expr {

template <class A, class B> requires expr::ExprOperands<A, B>
auto operator+(const A& a, const B& b) { return expr::make_bin("add", a, b); }
template <class A, class B> requires expr::ExprOperands<A, B>
auto operator-(const A& a, const B& b) { return expr::make_bin("sub", a, b); }
template <class A, class B> requires expr::ExprOperands<A, B>
auto operator*(const A& a, const B& b) { return expr::make_bin("mul", a, b); }
template <class A, class B> requires expr::ExprOperands<A, B>
auto operator/(const A& a, const B& b) { return expr::make_bin("div", a, b); }
template <class A> requires(expr::Operand<A> && !std::is_arithmetic_v<A>)
auto operator-(const A& a) {
  auto n = expr::node_of(a);
  return expr::Expr<expr::Un<decltype(n)>>{{"neg", n}};
}
/// Element-wise maximum / minimum / power inside an expression.
template <class A, class B> requires expr::ExprOperands<A, B>
auto max(const A& a, const B& b) { return expr::make_bin("max", a, b); }
template <class A, class B> requires expr::ExprOperands<A, B>
auto min(const A& a, const B& b) { return expr::make_bin("min", a, b); }

/// Applies an activation to an expression: extends the expression when the activation is element-wise and
/// fusable (the `fusable` rows of OAR_UNARY_OPS, ops/unary_list.hpp: the unary tokens of fused_elementwise,
/// which carry the activation's attributes: `softplus:beta=2`).
template <class N>
auto apply(const ActivationFn& f, const Expr<N>& e) {
  std::string token, why = ops::fused::unary_token(f.type, f.attrs, token);
  OAR_CHECK(why.empty(), "{} cannot be fused into an expression: {}", f.type, why);
  return Expr<Un<N>>{{token, e.node}};
}
}  // namespace expr

using expr::operator+;
using expr::operator-;
using expr::operator*;
using expr::operator/;
using expr::max;
using expr::min;

template <class E> requires expr::is_expr<E>::value
Var::Var(const E& e, std::source_location loc) : Var(expr::record(e, loc)) {}

template <class E> requires expr::is_expr<E>::value
auto ActivationFn::operator()(const E& e) const { return expr::apply(*this, e); }

/// Records an expression now (same as assigning it to a Var).
template <class N>
Var eval(const expr::Expr<N>& e, std::source_location loc = std::source_location::current()) { return expr::record(e, loc); }

}  // namespace oar
