// oar/ops/fused_elementwise.hpp: fused_elementwise, one element-wise expression over broadcast inputs X[i]
// given as a postfix program (attribute `expression`, grammar in docs/expressions.md), and its parser.
// The expression templates on Var (layers/expr.hpp) record it; the kernel runs it in one pass over memory.
#pragma once
#include <cctype>
#include <cstdlib>
#include <iterator>
#include <map>
#include <type_traits>
#include <string_view>
#include <unordered_map>

#include "oar/ops/unary_list.hpp"
#include "oar/ops/op.hpp"

// The unary functions of the grammar: `neg`, and the `fusable` rows of OAR_UNARY_OPS (ops/unary_list.hpp),
// each token the op type, computed by the op's functor (kernels/functors.hpp); an op's attributes follow a
// colon (`softplus:beta=2,threshold=10`, `gelu:approximate=true`), the list's defaults when absent. A reader
// of the list takes them with OAR_UNARY_IF_FUSABLE (see below and kernels/cpu/fused_elementwise.hpp).

// The binary operators: pop b, pop a, push a OP b.
#define OAR_FUSED_BINARY(X) X(add) X(sub) X(mul) X(div) X(max) X(min) X(pow)

namespace oar::ops {

namespace fused {

enum class Kind : uint8_t { input, constant, unary, binary };
#define OAR_FUSED_ENUM_U(kind, tok, ...) OAR_UNARY_IF_FUSABLE(kind, tok, )
enum class Unary : uint8_t { neg, OAR_UNARY_OPS(OAR_FUSED_ENUM_U) };
#undef OAR_FUSED_ENUM_U
#define OAR_FUSED_ENUM_B(tok) tok,
enum class Binary : uint8_t { OAR_FUSED_BINARY(OAR_FUSED_ENUM_B) };
#undef OAR_FUSED_ENUM_B

/// One node of a parsed expression, in postfix order. Operands are earlier nodes (a tree: each node is the
/// operand of exactly one later node, the last node is the result).
struct Node {
  Kind kind;
  uint8_t code = 0;    ///< Unary or Binary
  int32_t input = -1;  ///< input index (Kind::input)
  double value = 0;    ///< the constant (Kind::constant)
  float fvalue = 0;    ///< the constant rounded to float (kernels point at it)
  float p0 = 0, p1 = 0;  ///< a unary's attributes, as its functor takes them (fn::F::a, b)
  int32_t a = -1, b = -1;  ///< operand nodes (b only for binary)
  int32_t depth = 0;   ///< stack slot the node's value lives in while the program runs
};

/// A parsed, validated expression.
struct Program {
  std::vector<Node> nodes;
  int32_t max_input = -1;  ///< highest x<i> used
  int32_t max_depth = 0;   ///< stack slots the program needs
};

/// One attribute of a unary token (the op's, from ops/unary_list.hpp); an empty name is none.
struct UnaryParam {
  std::string_view name;
  bool is_bool = false;
  float dflt = 0;
};
/// A unary token: its name and attributes, in the functor's order (fn::F::a, b).
struct UnaryToken {
  std::string_view name;
  UnaryParam p[2];
};
/// The unary tokens, indexed by Unary.
#define OAR_FUSED_TOKEN(kind, tok, F, a0, d0, a1, d1)                                                         \
  OAR_UNARY_IF_FUSABLE(kind, UnaryToken{#tok, {{a0, std::is_same_v<decltype(d0), bool>, float(d0)},           \
                                                {a1, std::is_same_v<decltype(d1), bool>, float(d1)}}}, )
inline constexpr UnaryToken unary_tokens[] = {UnaryToken{"neg", {}}, OAR_UNARY_OPS(OAR_FUSED_TOKEN)};
#undef OAR_FUSED_TOKEN

/// "beta, threshold", or "none".
inline std::string param_names(const UnaryToken& t) {
  std::string r;
  for (const UnaryParam& p : t.p)
    if (!p.name.empty()) r += (r.empty() ? "" : ", ") + std::string(p.name);
  return r.empty() ? "none" : r;
}

/// Reads the attributes `spec` ("beta=2,threshold=10") of unary token `t` into `n.p0`, `n.p1`. Returns "" or
/// the reason; `where` names the token.
inline std::string parse_params(const UnaryToken& t, std::string_view spec, const std::string& where, Node& n) {
  size_t i = 0;
  while (i <= spec.size()) {
    size_t j = spec.find(',', i);
    if (j == std::string_view::npos) j = spec.size();
    std::string_view item = spec.substr(i, j - i);
    i = j + 1;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == item.size())
      return fmt::format("bad attribute '{}' in {} (want <name>=<value>)", item, where);
    std::string_view key = item.substr(0, eq);
    std::string val(item.substr(eq + 1));
    int k = t.p[0].name == key && !key.empty() ? 0 : t.p[1].name == key && !key.empty() ? 1 : -1;
    if (k < 0) return fmt::format("unknown attribute '{}' in {} ({} has {})", key, where, t.name, param_names(t));
    float v;
    if (t.p[k].is_bool) {
      if (val != "true" && val != "false") return fmt::format("bad value '{}' of attribute '{}' in {} (want true or false)", val, key, where);
      v = val == "true" ? 1.f : 0.f;
    } else {
      char* end = nullptr;
      double d = std::strtod(val.c_str(), &end);
      if (end != val.c_str() + val.size()) return fmt::format("bad value '{}' of attribute '{}' in {} (want a number)", val, key, where);
      v = float(d);
    }
    (k == 0 ? n.p0 : n.p1) = v;
  }
  return {};
}

/// The token applying the fusable unary op `type` with attributes `attrs` (an activation object's): the op
/// type, then a colon and the attributes that differ from their defaults (`softplus:beta=2`). Returns "" or
/// why it cannot be one.
inline std::string unary_token(std::string_view type, const std::map<std::string, Attribute>& attrs, std::string& token) {
  const UnaryToken* t = nullptr;
  for (size_t u = 1; u < std::size(unary_tokens); ++u)
    if (unary_tokens[u].name == type) t = &unary_tokens[u];
  if (!t) return "convert the expression to an oar::Var first";
  std::string spec;
  for (const auto& [key, value] : attrs) {
    int k = t->p[0].name == key && !key.empty() ? 0 : t->p[1].name == key && !key.empty() ? 1 : -1;
    if (k < 0) return fmt::format("{} has no attribute '{}' (it has {})", type, key, param_names(*t));
    std::string text;
    try {
      if (t->p[k].is_bool) {
        bool v = attr_as<bool>(value, key);
        if (float(v) != t->p[k].dflt) text = v ? "true" : "false";
      } else {
        float v = attr_as<float>(value, key);
        if (v != t->p[k].dflt) text = fmt::format("{}", v);
      }
    } catch (const Error& e) {
      return e.message();
    }
    if (!text.empty()) spec += (spec.empty() ? "" : ",") + key + "=" + text;
  }
  token = spec.empty() ? std::string(type) : fmt::format("{}:{}", type, spec);
  return {};
}

/// Parses a postfix `expr` over `num_inputs` inputs into `out`. Returns "" or the reason (naming the token
/// and its 0-based position among the tokens). Whitespace runs separate tokens.
inline std::string parse(std::string_view expr, size_t num_inputs, Program& out) {
  static const std::unordered_map<std::string_view, std::pair<Kind, uint8_t>> ops = [] {
    std::unordered_map<std::string_view, std::pair<Kind, uint8_t>> m;
    m["neg"] = {Kind::unary, uint8_t(Unary::neg)};
#define OAR_FUSED_MAP_U(kind, tok, ...) OAR_UNARY_IF_FUSABLE(kind, m[#tok] = {Kind::unary, uint8_t(Unary::tok)};)
    OAR_UNARY_OPS(OAR_FUSED_MAP_U)
#undef OAR_FUSED_MAP_U
#define OAR_FUSED_MAP_B(tok) m[#tok] = {Kind::binary, uint8_t(Binary::tok)};
    OAR_FUSED_BINARY(OAR_FUSED_MAP_B)
#undef OAR_FUSED_MAP_B
    return m;
  }();
  out = Program{};
  std::vector<int32_t> stack;
  size_t pos = 0, i = 0;
  while (true) {
    while (i < expr.size() && std::isspace(static_cast<unsigned char>(expr[i]))) ++i;
    if (i >= expr.size()) break;
    size_t j = i;
    while (j < expr.size() && !std::isspace(static_cast<unsigned char>(expr[j]))) ++j;
    std::string_view tok = expr.substr(i, j - i);
    i = j;
    Node n{};
    auto where = [&] { return fmt::format("'{}' at position {}", tok, pos); };
    if (tok.size() >= 2 && tok[0] == 'x' && std::isdigit(static_cast<unsigned char>(tok[1]))) {
      bool digits = tok.size() <= 10;
      for (char ch : tok.substr(1)) digits = digits && std::isdigit(static_cast<unsigned char>(ch));
      if (!digits) return fmt::format("bad input token {} (want x<index>)", where());
      long idx = std::strtol(std::string(tok.substr(1)).c_str(), nullptr, 10);
      if (size_t(idx) >= num_inputs)
        return fmt::format("input {} refers to X[{}] but the op has {} input{}", where(), idx, num_inputs, num_inputs == 1 ? "" : "s");
      n.kind = Kind::input;
      n.input = int32_t(idx);
      out.max_input = std::max(out.max_input, n.input);
    } else if (tok.starts_with("c:")) {
      std::string num(tok.substr(2));
      char* end = nullptr;
      double v = num.empty() ? 0 : std::strtod(num.c_str(), &end);
      if (num.empty() || end != num.c_str() + num.size()) return fmt::format("bad constant {} (want c:<number>)", where());
      n.kind = Kind::constant;
      n.value = v;
      n.fvalue = float(v);
    } else {
      size_t colon = tok.find(':');
      auto it = ops.find(tok.substr(0, colon));
      if (it == ops.end()) return fmt::format("unknown token {}", where());
      n.kind = it->second.first;
      n.code = it->second.second;
      if (n.kind == Kind::unary) {
        const UnaryToken& t = unary_tokens[n.code];
        n.p0 = t.p[0].dflt;
        n.p1 = t.p[1].dflt;
        if (colon != std::string_view::npos)
          if (std::string why = parse_params(t, tok.substr(colon + 1), where(), n); !why.empty()) return why;
      } else if (colon != std::string_view::npos) {
        return fmt::format("unknown token {}", where());
      }
      size_t need = n.kind == Kind::binary ? 2 : 1;
      if (stack.size() < need)
        return fmt::format("stack underflow: {} needs {} value{} but the stack holds {}", where(), need, need == 1 ? "" : "s", stack.size());
      if (n.kind == Kind::binary) {
        n.b = stack.back();
        stack.pop_back();
      }
      n.a = stack.back();
      stack.pop_back();
    }
    n.depth = int32_t(stack.size());
    stack.push_back(int32_t(out.nodes.size()));
    out.nodes.push_back(n);
    out.max_depth = std::max(out.max_depth, int32_t(stack.size()));
    ++pos;
  }
  if (stack.empty()) return "the expression is empty";
  if (stack.size() != 1) return fmt::format("the expression leaves {} values on the stack after {} tokens (must be exactly 1)", stack.size(), pos);
  return {};
}

/// numpy broadcasting of `a` and `b` (right-aligned; dims equal or 1; -1 unknown gives -1 unless the other
/// dim is > 1). Returns false when they cannot broadcast.
inline bool broadcast(const Shape& a, const Shape& b, Shape& out) {
  int r = std::max(a.rank(), b.rank());
  Shape d;  // dims inline: no heap (kernels call this on every run); `out` may be `a` or `b`
  d.resize(r);
  for (int i = 0; i < r; ++i) {
    int64_t x = i < r - a.rank() ? 1 : a[i - (r - a.rank())];
    int64_t y = i < r - b.rank() ? 1 : b[i - (r - b.rank())];
    if (x < 0 || y < 0) {
      int64_t other = x < 0 ? y : x;
      d[i] = other > 1 ? other : -1;
    } else if (x == y || y == 1) {
      d[i] = x;
    } else if (x == 1) {
      d[i] = y;
    } else {
      return false;
    }
  }
  out = d;
  return true;
}

/// "[2, 3], [3], [1]".
inline std::string shapes_str(const std::vector<Shape>& s) {
  std::string r;
  for (auto& x : s) r += (r.empty() ? "" : ", ") + x.str();
  return r;
}

}  // namespace fused

/// Out = f(X[0], X[1], ...), f given by `expression` in postfix form (docs/expressions.md), e.g.
/// relu(x0 * x1 + x2) is "x0 x1 mul x2 add relu". X: any shapes that broadcast (numpy rules) to Out's shape.
struct FusedElementwise {
  static constexpr std::string_view type = "fused_elementwise";
  static constexpr Slot x{"X"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<std::string> expression{"expression"};

  /// What the kernels read: the expression parsed once, when a program is prepared, against the op's number
  /// of inputs X (a bad expression is reported there, naming the op and the user's line).
  struct Attrs {
    fused::Program program;
    explicit Attrs(const AttrReader& r) {
      const std::string expr = r(FusedElementwise::expression);
      std::string why = fused::parse(expr, r.op().input(x).size(), program);
      if (!why.empty()) throw Error(fmt::format("{}: {} in expression \"{}\"", r.op().type(), why, expr), r.op().origin());
    }
  };

  static OpDef def() {
    return OpDef(type, "element-wise expression over broadcast inputs, evaluated in one pass")
        .in(x, duplicable, "inputs x0, x1, ... of the expression; one floating dtype; shapes broadcast")
        .out(out, none, "the expression's value, of the broadcast shape")
        .required_attr(expression, "postfix program: x<i>, c:<number>, add sub mul div max min pow, neg relu ...");
  }
  static void infer_shape(InferShapeContext& c) {
    size_t n = c.num_inputs(x);
    std::string expr = c.attr(expression);
    fused::Program p;
    std::string why = fused::parse(expr, n, p);
    c.check(why.empty(), "{} in expression \"{}\"", why, expr);
    DType t = c.dtype(x, 0);
    c.check(is_float(t), "X must be floating-point, X[0] is {}", name(t));
    std::vector<Shape> shapes;
    Shape os;
    for (size_t i = 0; i < n; ++i) {
      c.check(c.dtype(x, i) == t, "every X must have one dtype: X[0] is {} but X[{}] is {}", name(t), i, name(c.dtype(x, i)));
      shapes.push_back(c.shape(x, i));
    }
    bool ok = true;
    for (size_t i = 0; i < n && ok; ++i) ok = i == 0 ? (os = shapes[0], true) : fused::broadcast(os, shapes[i], os);
    c.check(ok, "input shapes {} do not broadcast (numpy rules: right-aligned dims must be equal or 1)", fused::shapes_str(shapes));
    c.set_output(out, os, t);
    c.share_lod(x, out);
  }
  /// fused_elementwise_grad(X, Out, Out@GRAD) -> X@GRAD (each reduced over its broadcast dims)
  static std::vector<Operator> grad(const GradContext& g) {
    return {g.grad_op({.inputs = {x}, .outputs = {out}, .output_grads = {out}, .input_grads = {x}})};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/fused_elementwise.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/fused_elementwise.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/fused.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/fused.hpp
};

}  // namespace oar::ops
