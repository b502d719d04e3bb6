// src/onnx/import.cpp: an ONNX graph as an oar program. Each node becomes one oar op or a few (element-wise
// math on floats as one fused_elementwise expression, whose broadcast is numpy's as ONNX's is); initializers
// become parameters (floats, trainable) or persistable constants; nodes whose inputs are all known at import
// time (the shape arithmetic of exported PyTorch models: Shape, Gather, Concat, Unsqueeze ...) are computed
// here and become constants. A node oar cannot run is an UnsupportedError naming it, its op type and the
// opset; any other bad input is an oar::Error naming the node.
#include <onnx/onnx_pb.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numbers>
#include <numeric>
#include <ranges>
#include <set>

#include "oar/core/error.hpp"
#include "oar/core/file.hpp"
#include "oar/ops/fused_elementwise.hpp"
#include "oar/ops/registry.hpp"
#include "oar/onnx/onnx.hpp"
#include "src/onnx/proto.hpp"

namespace oar::onnx {

namespace {

using ::onnx::NodeProto;
using TP = ::onnx::TensorProto;

/// A tensor's values as int64 (for shapes, axes, indices known at import time).
std::vector<int64_t> as_i64(const Tensor& t) {
  std::vector<int64_t> v(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = int64_t(t.get(i));
  return v;
}

Tensor i64_tensor(const std::vector<int64_t>& v, Shape s) { return Tensor::from<int64_t>(v, std::move(s)); }

class Importer {
 public:
  Importer(const ::onnx::ModelProto& m, std::string what, const ImportOptions& o) : m_(m), what_(std::move(what)), opt_(o) {}

  Model run(Place place) {
    for (const auto& imp : m_.opset_import())
      if (imp.domain().empty() || imp.domain() == "ai.onnx") opset_ = imp.version();
    if (opset_ < kMinOpset || opset_ > kMaxOpset)
      throw UnsupportedError(fmt::format("{}: ai.onnx opset {} is outside the opsets oar reads ({}..{})", what_, opset_, kMinOpset, kMaxOpset));
    const auto& g = m_.graph();
    for (const auto& t : g.initializer()) {
      if (t.name().empty()) throw Error(fmt::format("{}: an initializer has no name", what_));
      const_[t.name()] = detail::from_proto(t, fmt::format("{}: initializer '{}'", what_, t.name()));
      initializer_.insert(t.name());
    }
    for (const auto& t : g.sparse_initializer()) throw UnsupportedError(fmt::format("{}: sparse initializer '{}'", what_, t.values().name()));
    Topology topo;
    for (const auto& vi : g.input()) {
      if (const_.count(vi.name())) continue;  // an initializer listed among the inputs (IR < 4): a constant
      if (!vi.type().has_tensor_type()) throw UnsupportedError(fmt::format("{}: input '{}' is not a tensor", what_, vi.name()));
      const auto& tt = vi.type().tensor_type();
      const DType dt = oar_dtype_or_unsupported(tt.elem_type(), fmt::format("{}: input '{}'", what_, vi.name()));
      Shape s;
      if (!tt.has_shape()) throw UnsupportedError(fmt::format("{}: input '{}' has no shape (not even its rank)", what_, vi.name()));
      for (const auto& d : tt.shape().dim()) s.push_back(d.has_dim_value() ? d.dim_value() : -1);
      const std::string n = new_var(vi.name());
      b_.create_var(n, VarSpec{.dtype = dt, .shape = s, .persistable = false, .stop_gradient = true});
      var_[vi.name()] = n;
      topo.feeds.push_back(n);
    }
    for (int i = 0; i < g.node_size(); ++i) {
      node_ = &g.node(i);
      index_ = i;
      const auto it = handlers().find(node_->op_type());
      if (!node_->domain().empty() && node_->domain() != "ai.onnx")
        throw UnsupportedError(fmt::format("{}: {} is in domain '{}', not ai.onnx", what_, where(), node_->domain()));
      if (it == handlers().end()) throw UnsupportedError(fmt::format("{}: {}: oar has no {} op", what_, where(), node_->op_type()));
      try {
        (this->*(it->second))();
      } catch (UnsupportedError&) {
        throw;
      } catch (Error& e) {
        if (e.origin().known()) throw;  // from an op just added: the origin names the file and node
        throw Error(e.message().starts_with(what_) ? e.message() : fmt::format("{}: {}: {}", what_, where(), e.message()));
      }
    }
    for (const auto& vi : g.output()) {
      if (!var_.count(vi.name()) && const_.count(vi.name())) {  // an output known at import time
        node_ = nullptr;
        materialize(vi.name());
      }
      if (!var_.count(vi.name())) throw Error(fmt::format("{}: graph output '{}' is computed by no node", what_, vi.name()));
      topo.outputs.push_back(var_[vi.name()]);
    }
    topo.main = std::move(prog_);
    infer_program_shapes(topo.main);
    Model model(std::move(topo), place);
    for (auto& [n, t] : values_) model.scope().var(n).tensor() = LoDTensor(t.to(place));
    return model;
  }

  using Handler = void (Importer::*)();
  static const std::map<std::string, Handler>& handlers();

 private:
  const ::onnx::ModelProto& m_;
  std::string what_;
  ImportOptions opt_;
  int64_t opset_ = 1;
  Program prog_;
  Block& b_ = prog_.global_block();
  std::map<std::string, std::string> var_;              // ONNX value -> oar variable holding it
  std::map<std::string, Tensor> const_;                 // ONNX value -> its value, when known at import time
  std::set<std::string> initializer_;
  std::vector<std::pair<std::string, Tensor>> values_;  // persistables for the scope
  std::set<std::string> taken_;
  const NodeProto* node_ = nullptr;
  int index_ = 0;
  int tmp_ = 0;

  // ---- where and why

  std::string where() const {
    if (!node_) return "the graph";
    return node_->name().empty() ? fmt::format("node {} ({}, opset {})", index_, node_->op_type(), opset_)
                                 : fmt::format("node {} '{}' ({}, opset {})", index_, node_->name(), node_->op_type(), opset_);
  }
  /// Where an op made from the current node came from, for errors when the model runs: the model file and
  /// the node, counted from 1 in the place of a line.
  Origin origin() const {
    if (!node_) return Origin(what_, 0, "graph");
    return Origin(what_, index_ + 1, node_->name().empty() ? node_->op_type() : fmt::format("{} '{}'", node_->op_type(), node_->name()));
  }
  [[noreturn]] void unsupported(const std::string& why) const { throw UnsupportedError(fmt::format("{}: {}: {}", what_, where(), why)); }
  [[noreturn]] void fail(const std::string& why) const { throw Error(fmt::format("{}: {}: {}", what_, where(), why)); }
  DType oar_dtype_or_unsupported(int32_t t, const std::string& what) const {
    try {
      return detail::oar_dtype(t, what);
    } catch (Error& e) {
      throw UnsupportedError(e.message());
    }
  }

  // ---- names

  std::string new_var(const std::string& onnx_name) {
    std::string base;
    for (char c : onnx_name) base += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' || c == '-' || c == ':' ? c : '_';
    if (base.empty()) base = "v";
    std::string n = base;
    for (int k = 1; taken_.count(n) || b_.has_var(n); ++k) n = fmt::format("{}_{}", base, k);
    taken_.insert(n);
    return n;
  }
  std::string tmp() { return new_var(fmt::format("onnx_tmp_{}", tmp_++)); }

  // ---- inputs and outputs of the node

  int num_in() const { return node_->input_size(); }
  bool has_in(int i) const { return i < node_->input_size() && !node_->input(i).empty(); }
  const std::string& in_name(int i) const {
    if (!has_in(i)) fail(fmt::format("has no input {}", i));
    return node_->input(i);
  }
  /// Input i's value when it is known at import time, else nullptr.
  const Tensor* const_in(int i) const {
    if (!has_in(i)) return nullptr;
    auto it = const_.find(node_->input(i));
    return it == const_.end() ? nullptr : &it->second;
  }
  const Tensor& need_const(int i, const char* what) const {
    if (const Tensor* t = const_in(i)) return *t;
    unsupported(fmt::format("its {} (input {}) is computed at run time; oar needs it known when the model is imported", what, i));
  }
  bool all_const() const {
    for (int i = 0; i < num_in(); ++i)
      if (has_in(i) && !const_in(i)) return false;
    return true;
  }
  /// The oar variable holding value `n` (a known constant becomes a persistable variable the first time an
  /// op reads it: a trainable parameter when it is a float initializer).
  std::string materialize(const std::string& n, bool trainable = true) {
    if (auto it = var_.find(n); it != var_.end()) return it->second;
    auto c = const_.find(n);
    if (c == const_.end()) fail(fmt::format("reads '{}', which no earlier node computes and which is neither an input nor an initializer", n));
    const std::string v = new_var(n);
    const Tensor& t = c->second;
    if (trainable && opt_.trainable && initializer_.count(n) && is_float(t.dtype()) && t.rank() > 0) {
      ParamInfo info;
      info.initializer = "onnx";
      b_.create_parameter(v, t.dtype(), t.shape(), info);
    } else {
      b_.create_var(v, VarSpec{.dtype = t.dtype(), .shape = t.shape(), .persistable = true, .stop_gradient = true});
    }
    values_.push_back({v, t});
    var_[n] = v;
    return v;
  }
  std::string in(int i, bool trainable = true) { return materialize(in_name(i), trainable); }
  const Variable& var(const std::string& v) const { return b_.var(v); }
  DType dtype(const std::string& v) const { return var(v).dtype(); }
  const Shape& shape(const std::string& v) const { return var(v).shape(); }
  int rank(const std::string& v) const { return shape(v).rank(); }
  DType in_dtype(int i) const {
    if (const Tensor* t = const_in(i)) return t->dtype();
    auto it = var_.find(in_name(i));
    if (it == var_.end()) fail(fmt::format("reads '{}', which no earlier node computes", in_name(i)));
    return dtype(it->second);
  }
  Shape in_shape(int i) const {
    if (const Tensor* t = const_in(i)) return t->shape();
    auto it = var_.find(in_name(i));
    if (it == var_.end()) fail(fmt::format("reads '{}', which no earlier node computes", in_name(i)));
    return shape(it->second);
  }
  int num_out() const { return node_->output_size(); }
  bool has_out(int i) const { return i < node_->output_size() && !node_->output(i).empty(); }
  /// A new oar variable for output i.
  std::string out(int i) {
    if (!has_out(i)) fail(fmt::format("has no output {}", i));
    const std::string& n = node_->output(i);
    if (var_.count(n) || const_.count(n)) fail(fmt::format("assigns '{}' a second time", n));
    const std::string v = new_var(n);
    var_[n] = v;
    return v;
  }
  void only_outputs(int n) const {
    for (int i = n; i < num_out(); ++i)
      if (has_out(i)) unsupported(fmt::format("its output {} ('{}') is not supported (only the first {})", i, node_->output(i), n));
  }
  void set_const(int i, Tensor t) {
    if (!has_out(i)) return;
    const_[node_->output(i)] = std::move(t);
  }
  /// Output 0, a constant that is input 0 reshaped: the same weights, trainable when those are.
  void set_reshaped_const(Tensor t) {
    if (has_in(0) && initializer_.count(in_name(0)) && has_out(0)) initializer_.insert(node_->output(0));
    set_const(0, std::move(t));
  }

  // ---- attributes

  const ::onnx::AttributeProto* attr(const char* k) const {
    for (const auto& a : node_->attribute())
      if (a.name() == k) return &a;
    return nullptr;
  }
  int64_t ai(const char* k, int64_t d) const {
    auto* a = attr(k);
    return a ? a->i() : d;
  }
  float af(const char* k, float d) const {
    auto* a = attr(k);
    return a ? a->f() : d;
  }
  std::string as(const char* k, std::string d) const {
    auto* a = attr(k);
    return a ? a->s() : d;
  }
  std::vector<int64_t> ais(const char* k, std::vector<int64_t> d = {}) const {
    auto* a = attr(k);
    return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : d;
  }
  static int64_t norm_axis(int64_t a, int r) { return a < 0 ? a + r : a; }
  int64_t axis_in(int64_t a, int r) const {
    const int64_t n = norm_axis(a, r);
    if (n < 0 || n >= std::max(r, 1)) fail(fmt::format("axis {} is out of range for rank {}", a, r));
    return n;
  }
  static std::vector<int32_t> i32(const std::vector<int64_t>& v) {
    std::vector<int32_t> o;
    for (auto x : v) o.push_back(int32_t(std::clamp<int64_t>(x, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max())));
    return o;
  }

  // ---- appending ops

  Operator& add(const std::string& type, std::vector<SlotArgs> ins, std::vector<SlotArgs> outs, const std::map<std::string, Attribute>& attrs = {}) {
    Operator op(type);
    for (auto& s : ins) op.set_input(s.slot, s.args);
    for (auto& s : outs) op.set_output(s.slot, s.args);
    for (auto& [k, v] : attrs) op.set_attr(k, v);
    op.set_origin(origin());
    return add_op(b_, std::move(op));
  }
  void need_float(const std::string& v) const {
    const DType t = dtype(v);
    if (t != DType::f32 && t != DType::f64) unsupported(fmt::format("its input is {}; oar runs this op on f32 and f64 tensors only", name(t)));
  }
  /// A fused_elementwise expression over `xs` into `out` (floats; numpy's broadcast, as ONNX's).
  void fused(const std::vector<std::string>& xs, const std::string& expr, const std::string& out) {
    for (auto& x : xs) need_float(x);
    for (auto& x : xs)
      if (dtype(x) != dtype(xs[0])) fail(fmt::format("mixes {} and {}", name(dtype(xs[0])), name(dtype(x))));
    add("fused_elementwise", {{"X", xs}}, {{"Out", {out}}}, {{"expression", Attribute(expr)}});
  }
  std::string fused_tmp(const std::vector<std::string>& xs, const std::string& expr) {
    std::string o = tmp();
    fused(xs, expr, o);
    return o;
  }
  void unary_op(const std::string& type, const std::map<std::string, Attribute>& attrs = {}) {
    const std::string x = in(0);
    need_float(x);
    add(type, {{"X", {x}}}, {{"Out", {out(0)}}}, attrs);
  }
  void reshape_to(const std::string& x, const std::vector<int64_t>& s, const std::string& o) {
    add("reshape", {{"X", {x}}}, {{"Out", {o}}}, {{"shape", Attribute(i32(s))}});
  }

  /// A constant of x's dtype made a persistable variable, under a name derived from the node's input `i`.
  std::string const_var(const std::string& key, Tensor t) {
    const std::string n = (node_ ? node_->output(0) : std::string("graph")) + "/" + key;
    const_[n] = std::move(t);
    return materialize(n, false);
  }
  /// x with its dim `axis` (of known size) in reverse order: gather along dim 0, the axis moved there and back.
  std::string reverse(const std::string& x, int axis) {
    const Shape xs = shape(x);
    const int64_t n = xs[axis];
    if (n < 0) unsupported(fmt::format("reversing a dim of unknown size in {}", xs.str()));
    std::vector<int64_t> idx;
    for (int64_t i = n - 1; i >= 0; --i) idx.push_back(i);
    std::vector<int64_t> perm;
    perm.push_back(axis);
    for (int i = 0; i < xs.rank(); ++i)
      if (i != axis) perm.push_back(i);
    std::string v = x;
    if (axis != 0) v = tmp(), add("transpose", {{"X", {x}}}, {{"Out", {v}}}, {{"axis", Attribute(i32(perm))}});
    std::string g = tmp();
    add("gather", {{"X", {v}}, {"Index", {const_var(fmt::format("reverse{}", axis), i64_tensor(idx, Shape{n}))}}}, {{"Out", {g}}});
    if (axis == 0) return g;
    std::vector<int64_t> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int64_t(i);
    std::string o = tmp();
    add("transpose", {{"X", {g}}}, {{"Out", {o}}}, {{"axis", Attribute(i32(inv))}});
    return o;
  }
  /// Integer indices into a dim of size n with the negative ones counted from the end, as i64:
  /// i + n (1 - sign(i + 1/2)) / 2, in f64 (exact for any index).
  std::string wrap_negative(const std::string& idx, int64_t n) {
    std::string f = cast_to(idx, DType::f64), sh = tmp(), sg = tmp();
    add("fused_elementwise", {{"X", {f}}}, {{"Out", {sh}}}, {{"expression", Attribute(std::string("x0 c:0.5 add"))}});
    add("sign", {{"X", {sh}}}, {{"Out", {sg}}});
    return cast_to(fused_tmp({f, sg}, fmt::format("x0 c:1 x1 sub c:{} mul add", double(n) / 2)), DType::i64);
  }
  /// transpose(x, perm) and the permutation that undoes it.
  static std::vector<int64_t> inverse(const std::vector<int64_t>& perm) {
    std::vector<int64_t> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int64_t(i);
    return inv;
  }
  std::string transposed(const std::string& x, const std::vector<int64_t>& perm) {
    bool id = true;
    for (size_t i = 0; i < perm.size(); ++i) id = id && perm[i] == int64_t(i);
    if (id) return x;
    std::string o = tmp();
    add("transpose", {{"X", {x}}}, {{"Out", {o}}}, {{"axis", Attribute(i32(perm))}});
    return o;
  }
  /// The permutation that moves `axis` last.
  static std::vector<int64_t> axis_last(int rank, int64_t axis) {
    std::vector<int64_t> p;
    for (int i = 0; i < rank; ++i)
      if (i != axis) p.push_back(i);
    p.push_back(axis);
    return p;
  }
  std::string to_f64_if_int(const std::string& x) {
    const DType t = dtype(x);
    if (t == DType::i32 || t == DType::i64) return cast_to(x, DType::f64);
    need_float(x);
    return x;
  }
  /// r (computed in f64 for an integer result) into output 0 as dtype t.
  void out_as(const std::string& r, DType t) {
    if (dtype(r) == t) return add("assign", {{"X", {r}}}, {{"Out", {out(0)}}}), void();
    add("cast", {{"X", {r}}}, {{"Out", {out(0)}}}, {{"in_dtype", Attribute(int32_t(dtype(r)))}, {"out_dtype", Attribute(int32_t(t))}});
  }
  void out_like(const std::string& r, const std::string& like) { out_as(r, dtype(like)); }

  // ---- handlers: element-wise

  void h_unary() {
    static const std::map<std::string, std::string> tok = {{"Relu", "relu"},         {"Sigmoid", "sigmoid"},   {"Tanh", "tanh"}, {"Exp", "exp"},
                                                           {"Log", "log"},           {"Sqrt", "sqrt"},         {"Abs", "abs"},   {"Reciprocal", "reciprocal"},
                                                           {"Softsign", "softsign"}, {"Softplus", "softplus"}, {"Erf", "erf"},   {"Neg", "neg"},
                                                           {"Floor", "floor"},       {"Ceil", "ceil"},         {"Round", "round"}, {"Sin", "sin"},
                                                           {"Cos", "cos"},           {"Tan", "tan"},           {"Asin", "asin"}, {"Acos", "acos"},
                                                           {"Atan", "atan"},         {"Sinh", "sinh"},         {"Cosh", "cosh"}, {"Asinh", "asinh"},
                                                           {"Acosh", "acosh"},       {"Atanh", "atanh"}};
    only_outputs(1);
    const std::string x = in(0);
    const DType dt = dtype(x);
    if ((dt == DType::i32 || dt == DType::i64) && (node_->op_type() == "Neg" || node_->op_type() == "Abs")) {  // exact in f64
      std::string r = fused_tmp({cast_to(x, DType::f64)}, "x0 " + tok.at(node_->op_type()));
      out_as(r, dt);
      return;
    }
    fused({x}, "x0 " + tok.at(node_->op_type()), out(0));
  }
  /// Before opset 7, Add and the like broadcast only when told (`broadcast`, `axis`): refused.
  void no_legacy_broadcast() const {
    if (opset_ < 7 && ai("broadcast", 0) != 0) unsupported("the legacy broadcast attribute (before opset 7)");
  }
  void h_binary() {
    no_legacy_broadcast();
    static const std::map<std::string, std::string> tok = {{"Add", "add"}, {"Sub", "sub"}, {"Mul", "mul"}, {"Div", "div"}, {"Pow", "pow"}};
    const std::string& t = tok.at(node_->op_type());
    if (all_const() && is_integer(in_dtype(0)) && is_integer(in_dtype(1)) && t != "pow") return fold_int_binary(t);
    if (node_->op_type() == "Pow" && const_in(1) && const_in(1)->numel() == 1 && is_float(in_dtype(0))) {
      const double e = const_in(1)->get(0);
      if (e == 2) return fused({in(0)}, "x0 square", out(0));
      return add("pow", {{"X", {in(0)}}}, {{"Out", {out(0)}}}, {{"factor", Attribute(float(e))}}), void();
    }
    std::string a = in(0), b = in(1);
    if (node_->op_type() == "Pow" && dtype(b) != dtype(a)) b = cast_to(b, dtype(a));
    const DType dt = dtype(a);
    if (dt == DType::f32 || dt == DType::f64) return fused({a, b}, "x0 x1 " + t, out(0));
    if (t == "pow" && (dt == DType::i32 || dt == DType::i64)) {  // in f64, exact for the integers a power can reach
      std::string p = fused_tmp({cast_to(a, DType::f64), cast_to(b, DType::f64)}, "x0 x1 pow");
      out_as(p, dt);
      return;
    }
    fluid_binary(a, b, "elementwise_" + t, t == "add" || t == "mul", "", t == "div" || t == "pow" ? kFloats : kNumbers, true);
  }
  static constexpr std::initializer_list<DType> kFloats = {DType::f32, DType::f64};
  static constexpr std::initializer_list<DType> kNumbers = {DType::f32, DType::f64, DType::i32, DType::i64};
  static constexpr std::initializer_list<DType> kBools = {DType::boolean};
  /// A binary op of Fluid's broadcast (Y over X's trailing dims), used where fused_elementwise does not
  /// reach: integer math, comparisons, logic. Numpy's broadcast is that one when Y's dims are X's last
  /// dims or Y holds one value; else X and Y swap when the op allows (`commutes`, or `flipped` names the
  /// op with its operands swapped), else the node is unsupported.
  void fluid_binary(std::string a, std::string b, const std::string& type, bool commutes, const std::string& flipped,
                    std::initializer_list<DType> dtypes, bool broadcasts) {
    if (std::find(dtypes.begin(), dtypes.end(), dtype(a)) == dtypes.end())
      unsupported(fmt::format("its inputs are {}; oar's {} runs on {}", name(dtype(a)), type, fmt::join(dtypes | std::views::transform(name), ", ")));
    if (!broadcasts && shape(a) != shape(b)) unsupported(fmt::format("{} and {} differ in shape; oar's {} broadcasts nothing", shape(a).str(), shape(b).str(), type));
    auto fits = [&](const Shape& x, const Shape& y) {
      if (x == y) return true;  // one shape (an unknown batch dim on both: they must agree when run)
      if (y.known() && y.numel() == 1) return true;
      if (y.rank() > x.rank()) return false;
      for (int i = 1; i <= y.rank(); ++i)
        if (y[y.rank() - i] != x[x.rank() - i] || y[y.rank() - i] < 0) return false;
      return true;
    };
    std::string op = type;
    if (!fits(shape(a), shape(b))) {
      if (!fits(shape(b), shape(a)) || (!commutes && flipped.empty()))
        unsupported(fmt::format("{} over {} and {} with numpy's broadcast (oar broadcasts Y over X's last dims)", name(dtype(a)),
                                shape(a).str(), shape(b).str()));
      std::swap(a, b);
      if (!commutes) op = flipped;
    }
    if (dtype(a) != dtype(b)) fail(fmt::format("mixes {} and {}", name(dtype(a)), name(dtype(b))));
    std::map<std::string, Attribute> attrs;
    if (broadcasts) attrs["axis"] = Attribute(int32_t(-1));
    add(op, {{"X", {a}}, {"Y", {b}}}, {{"Out", {out(0)}}}, attrs);
  }
  void h_compare() {
    no_legacy_broadcast();
    static const std::map<std::string, std::pair<std::string, std::string>> ops = {{"Equal", {"equal", "equal"}},
                                                                                 {"Less", {"less_than", "greater_than"}},
                                                                                 {"Greater", {"greater_than", "less_than"}},
                                                                                 {"LessOrEqual", {"less_equal", "greater_equal"}},
                                                                                 {"GreaterOrEqual", {"greater_equal", "less_equal"}}};
    const auto& [type, flipped] = ops.at(node_->op_type());
    fluid_binary(in(0), in(1), type, type == "equal", flipped, kNumbers, true);
  }
  void h_logical() {
    no_legacy_broadcast();
    static const std::map<std::string, std::string> ops = {{"And", "logical_and"}, {"Or", "logical_or"}, {"Xor", "logical_xor"}};
    fluid_binary(in(0), in(1), ops.at(node_->op_type()), true, "", kBools, false);
  }
  void h_not() { add("logical_not", {{"X", {in(0)}}}, {{"Out", {out(0)}}}); }
  void fold_int_binary(const std::string& t) {
    const Tensor &a = *const_in(0), &b = *const_in(1);
    Shape s;
    if (!ops::fused::broadcast(a.shape(), b.shape(), s)) fail(fmt::format("cannot broadcast {} with {}", a.shape().str(), b.shape().str()));
    auto av = as_i64(a), bv = as_i64(b);
    std::vector<int64_t> o(size_t(s.numel()));
    // numpy broadcast by index arithmetic (constants here are small: shapes and indices)
    auto index = [&](const Shape& from, int64_t flat) {
      int64_t idx = 0, stride = 1;
      for (int d = s.rank() - 1, fd = from.rank() - 1; d >= 0; --d, --fd) {
        const int64_t coord = flat % s[d];
        flat /= s[d];
        if (fd >= 0) {
          if (from[fd] != 1) idx += coord * stride;
          stride *= from[fd];
        }
      }
      return idx;
    };
    for (int64_t i = 0; i < s.numel(); ++i) {
      const int64_t x = av[size_t(index(a.shape(), i))], y = bv[size_t(index(b.shape(), i))];
      if (t == "div" && y == 0) fail("divides by zero");
      o[size_t(i)] = t == "add" ? x + y : t == "sub" ? x - y : t == "mul" ? x * y : x / y;
    }
    set_const(0, cast_const(i64_tensor(o, s), a.dtype()));
  }
  static Tensor cast_const(const Tensor& t, DType to) {
    if (t.dtype() == to) return t;
    Tensor o(t.shape(), to);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const double v = t.get(i);
      visit_dtype(to, [&](auto tag) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_arithmetic_v<T>) o.data<T>()[i] = static_cast<T>(v);
        else throw Error(fmt::format("no constant conversion to {}", name(to)));
      });
    }
    return o;
  }
  /// What oar's cast converts between.
  void need_castable(DType from, DType to) const {
    for (DType t : {from, to})
      if (t != DType::boolean && t != DType::i32 && t != DType::i64 && t != DType::f16 && t != DType::f32 && t != DType::f64 && t != DType::bf16)
        unsupported(fmt::format("a cast from {} to {} (oar casts between bool, i32, i64, f16, f32, f64, bf16)", name(from), name(to)));
  }
  std::string cast_to(const std::string& x, DType to) {
    if (dtype(x) == to) return x;
    std::string o = tmp();
    add("cast", {{"X", {x}}}, {{"Out", {o}}}, {{"in_dtype", Attribute(int32_t(dtype(x)))}, {"out_dtype", Attribute(int32_t(to))}});
    return o;
  }
  void h_variadic() {  // Sum, Mean, Max, Min over any number of inputs
    static const std::map<std::string, std::string> tok = {{"Sum", "add"}, {"Mean", "add"}, {"Max", "max"}, {"Min", "min"}};
    std::vector<std::string> xs;
    std::string e = "x0";
    for (int i = 0; i < num_in(); ++i) {
      xs.push_back(in(i));
      if (i > 0) e += fmt::format(" x{} {}", i, tok.at(node_->op_type()));
    }
    if (xs.empty()) fail("has no inputs");
    if (node_->op_type() == "Mean") e += fmt::format(" c:{} div", xs.size());
    fused(xs, e, out(0));
  }
  void h_leaky_relu() { unary_op("leaky_relu", {{"alpha", Attribute(af("alpha", 0.01f))}}); }
  void h_elu() { unary_op("elu", {{"alpha", Attribute(af("alpha", 1.0f))}}); }
  void h_hard_sigmoid() { unary_op("hard_sigmoid", {{"slope", Attribute(af("alpha", 0.2f))}, {"offset", Attribute(af("beta", 0.5f))}}); }
  void h_selu() {  // gamma (x > 0 ? x : alpha (e^x - 1))
    const std::string x = in(0);
    need_float(x);
    std::string e = tmp();
    add("elu", {{"X", {x}}}, {{"Out", {e}}}, {{"alpha", Attribute(af("alpha", 1.67326319217681884765625f))}});
    add("scale", {{"X", {e}}}, {{"Out", {out(0)}}}, {{"scale", Attribute(af("gamma", 1.05070102214813232421875f))}});
  }
  void h_hard_swish() {  // x hard_sigmoid(x) with alpha 1/6, beta 1/2
    const std::string x = in(0);
    need_float(x);
    std::string h = tmp();
    add("hard_sigmoid", {{"X", {x}}}, {{"Out", {h}}}, {{"slope", Attribute(1.0f / 6)}, {"offset", Attribute(0.5f)}});
    fused({x, h}, "x0 x1 mul", out(0));
  }
  void h_prelu() { fused({in(0), in(1)}, "x0 relu x1 x0 neg relu mul sub", out(0)); }
  void h_clip() {
    const std::string x = in(0);
    need_float(x);
    float lo = -std::numeric_limits<float>::max(), hi = std::numeric_limits<float>::max();
    if (opset_ < 11) {
      lo = af("min", lo), hi = af("max", hi);
    } else if ((has_in(1) && !const_in(1)) || (has_in(2) && !const_in(2))) {  // bounds computed at run time
      std::vector<std::string> xs = {x};
      std::string e = "x0";
      if (has_in(1)) xs.push_back(in(1)), e += fmt::format(" x{} max", xs.size() - 1);
      if (has_in(2)) xs.push_back(in(2)), e += fmt::format(" x{} min", xs.size() - 1);
      return fused(xs, e, out(0));
    } else {
      if (has_in(1)) lo = float(need_const(1, "min").get(0));
      if (has_in(2)) hi = float(need_const(2, "max").get(0));
    }
    add("clip", {{"X", {x}}}, {{"Out", {out(0)}}}, {{"min", Attribute(lo)}, {"max", Attribute(hi)}});
  }
  void h_identity() {
    if (const Tensor* t = const_in(0)) return set_reshaped_const(*t);
    add("assign", {{"X", {in(0)}}}, {{"Out", {out(0)}}});
  }
  void h_dropout() {  // inference: the identity, and a mask of all true (training_mode is not supported)
    only_outputs(2);
    if (has_in(2) && need_const(2, "training_mode").get(0) != 0) unsupported("training_mode is true");
    if (ai("is_test", 1) == 0 && opset_ < 7) unsupported("is_test 0");
    const std::string x = in(0);
    add("assign", {{"X", {x}}}, {{"Out", {out(0)}}});
    if (has_out(1)) {
      if (!shape(x).known()) unsupported(fmt::format("a mask output for an input of unknown shape {}", shape(x).str()));
      Tensor m(shape(x), DType::boolean);
      std::memset(m.raw(), 1, m.bytes());
      set_const(1, m);
    }
  }

  // ---- handlers: matrices, convolution, pooling, normalization

  void h_matmul() {
    const std::string a = in(0), b = in(1);
    need_float(a);
    add("matmul", {{"X", {a}}, {"Y", {b}}}, {{"Out", {out(0)}}});
  }
  void h_gemm() {  // alpha op(A) op(B) + beta C
    const std::string a = in(0), b = in(1);
    need_float(a);
    const float alpha = af("alpha", 1), beta = af("beta", 1);
    const bool c = has_in(2);
    std::string ab = c ? tmp() : out(0);
    add("matmul", {{"X", {a}}, {"Y", {b}}}, {{"Out", {ab}}},
        {{"transpose_X", Attribute(ai("transA", 0) != 0)}, {"transpose_Y", Attribute(ai("transB", 0) != 0)}, {"alpha", Attribute(alpha)}});
    if (c) fused({ab, in(2)}, beta == 1 ? "x0 x1 add" : fmt::format("x0 x1 c:{} mul add", double(beta)), out(0));
  }
  /// Symmetric 2-D paddings [ph, pw] from ONNX's pads / auto_pad, for input spatial dims `in` and window `k`.
  std::vector<int32_t> pads2d(const Shape& xs, const std::vector<int64_t>& k, const std::vector<int64_t>& strides, const std::vector<int64_t>& dil) {
    const std::string ap = as("auto_pad", "NOTSET");
    std::vector<int64_t> p = ais("pads", {0, 0, 0, 0});
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      p.assign(4, 0);
      for (int d = 0; d < 2; ++d) {
        const int64_t in = xs[2 + d];
        if (in < 0) unsupported("auto_pad SAME over a spatial dim of unknown size");
        const int64_t o = (in + strides[size_t(d)] - 1) / strides[size_t(d)];
        const int64_t total = std::max<int64_t>(0, (o - 1) * strides[size_t(d)] + (k[size_t(d)] - 1) * dil[size_t(d)] + 1 - in);
        p[size_t(d)] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
        p[size_t(d) + 2] = total - p[size_t(d)];
      }
    } else if (ap == "VALID") {
      p.assign(4, 0);
    } else if (ap != "NOTSET") {
      fail(fmt::format("auto_pad '{}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID", ap));
    }
    if (p.size() != 4) unsupported(fmt::format("pads [{}] (oar pads two spatial dims)", fmt::join(p, ", ")));
    if (p[0] != p[2] || p[1] != p[3]) unsupported(fmt::format("asymmetric pads [{}]", fmt::join(p, ", ")));
    return {int32_t(p[0]), int32_t(p[1])};
  }
  void h_conv() {
    const std::string x = in(0), w = in(1);
    need_float(x);
    const Shape xs = shape(x), ws = shape(w);
    if (xs.rank() != 4) unsupported(fmt::format("a {}-D convolution (oar has 2-D)", xs.rank() - 2));
    const auto k = ais("kernel_shape", {ws[2], ws[3]});
    const auto s = ais("strides", {1, 1}), d = ais("dilations", {1, 1});
    auto p = pads2d(xs, k, s, d);
    const std::map<std::string, Attribute> attrs = {
        {"strides", Attribute(i32(s))}, {"paddings", Attribute(p)}, {"dilations", Attribute(i32(d))}, {"groups", Attribute(int32_t(ai("group", 1)))}};
    if (!has_in(2)) return add("conv2d", {{"Input", {x}}, {"Filter", {w}}}, {{"Output", {out(0)}}}, attrs), void();
    std::string c = tmp();
    add("conv2d", {{"Input", {x}}, {"Filter", {w}}}, {{"Output", {c}}}, attrs);
    add("elementwise_add", {{"X", {c}}, {"Y", {in(2)}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(int32_t(1))}});
  }
  void h_conv_transpose() {
    const std::string x = in(0), w = in(1);
    need_float(x);
    const Shape xs = shape(x), ws = shape(w);
    if (xs.rank() != 4) unsupported(fmt::format("a {}-D transposed convolution (oar has 2-D)", xs.rank() - 2));
    if (as("auto_pad", "NOTSET") != "NOTSET") unsupported(fmt::format("auto_pad {}", as("auto_pad", "")));
    for (auto v : ais("output_padding", {0, 0}))
      if (v != 0) unsupported(fmt::format("output_padding [{}]", fmt::join(ais("output_padding"), ", ")));
    const auto k = ais("kernel_shape", {ws[2], ws[3]});
    if (k != std::vector<int64_t>{ws[2], ws[3]}) fail(fmt::format("kernel_shape [{}] differs from W {}", fmt::join(k, ", "), ws.str()));
    const auto p = ais("pads", {0, 0, 0, 0});
    if (p.size() != 4 || p[0] != p[2] || p[1] != p[3]) unsupported(fmt::format("pads [{}] (oar pads both sides alike)", fmt::join(p, ", ")));
    std::map<std::string, Attribute> attrs = {{"strides", Attribute(i32(ais("strides", {1, 1})))},
                                              {"paddings", Attribute(std::vector<int32_t>{int32_t(p[0]), int32_t(p[1])})},
                                              {"dilations", Attribute(i32(ais("dilations", {1, 1})))},
                                              {"groups", Attribute(int32_t(ai("group", 1)))}};
    if (attr("output_shape")) {
      auto os = ais("output_shape");
      if (os.size() != 2) unsupported(fmt::format("output_shape [{}]", fmt::join(os, ", ")));
      attrs["output_size"] = Attribute(i32(os));
    }
    if (!has_in(2)) return add("conv2d_transpose", {{"Input", {x}}, {"Filter", {w}}}, {{"Output", {out(0)}}}, attrs), void();
    std::string c = tmp();
    add("conv2d_transpose", {{"Input", {x}}, {"Filter", {w}}}, {{"Output", {c}}}, attrs);
    add("elementwise_add", {{"X", {c}}, {"Y", {in(2)}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(int32_t(1))}});
  }
  void h_pool() {
    const bool max = node_->op_type() == "MaxPool";
    only_outputs(1);
    const std::string x = in(0);
    need_float(x);
    const Shape xs = shape(x);
    if (xs.rank() != 4) unsupported(fmt::format("{}-D pooling (oar has 2-D)", xs.rank() - 2));
    const auto k = ais("kernel_shape");
    if (k.size() != 2) fail("needs a kernel_shape of two dims");
    const auto s = ais("strides", {1, 1}), d = ais("dilations", {1, 1});
    if (d != std::vector<int64_t>{1, 1}) unsupported(fmt::format("dilations [{}]", fmt::join(d, ", ")));
    if (ai("storage_order", 0) != 0) unsupported("storage_order 1");
    auto p = pads2d(xs, k, s, d);
    add("pool2d", {{"X", {x}}}, {{"Out", {out(0)}}},
        {{"pooling_type", Attribute(std::string(max ? "max" : "avg"))},
         {"ksize", Attribute(i32(k))},
         {"strides", Attribute(i32(s))},
         {"paddings", Attribute(p)},
         {"ceil_mode", Attribute(ai("ceil_mode", 0) != 0)},
         {"exclusive", Attribute(ai("count_include_pad", 0) == 0)}});
  }
  void h_global_pool() {
    const std::string x = in(0);
    need_float(x);
    if (rank(x) != 4) unsupported(fmt::format("{}-D pooling (oar has 2-D)", rank(x) - 2));
    add("pool2d", {{"X", {x}}}, {{"Out", {out(0)}}},
        {{"pooling_type", Attribute(std::string(node_->op_type() == "GlobalMaxPool" ? "max" : "avg"))},
         {"ksize", Attribute(std::vector<int32_t>{1, 1})},
         {"global_pooling", Attribute(true)}});
  }
  void h_batch_norm() {
    only_outputs(1);
    if (ai("training_mode", 0) != 0) unsupported("training_mode 1");
    if (ai("spatial", 1) != 1) unsupported("spatial 0 (statistics per element, before opset 9)");
    if (opset_ < 7 && ai("is_test", 0) == 0) unsupported("is_test 0 (training, before opset 7)");
    const std::string x = in(0);
    need_float(x);
    // Fluid's layout: the running statistics updated in place (is_test leaves them), the batch's kept for the gradient.
    const std::string mean = in(3, false), var = in(4, false);  // running statistics, not trained
    add("batch_norm", {{"X", {x}}, {"Scale", {in(1)}}, {"Bias", {in(2)}}, {"Mean", {mean}}, {"Variance", {var}}},
        {{"Y", {out(0)}}, {"MeanOut", {mean}}, {"VarianceOut", {var}}, {"SavedMean", {tmp()}}, {"SavedVariance", {tmp()}}},
        {{"epsilon", Attribute(af("epsilon", 1e-5f))}, {"momentum", Attribute(af("momentum", 0.9f))}, {"is_test", Attribute(true)}});
  }
  void h_layer_norm() {
    only_outputs(3);
    const std::string x = in(0);
    need_float(x);
    const Shape xs = shape(x);
    const int64_t axis = axis_in(ai("axis", -1), xs.rank());
    // oar's Scale and Bias are flat: [prod(normalized dims)].
    auto flat = [&](int i) -> std::string {
      if (const Tensor* t = const_in(i)) {
        if (t->rank() == 1) return in(i);
        const_[in_name(i) + "/flat"] = t->view(Shape{t->numel()});
        return materialize(in_name(i) + "/flat");
      }
      std::string o = tmp();
      reshape_to(in(i), {-1}, o);
      return o;
    };
    // Over every dim (axis 0): oar's layer_norm keeps at least one row, so X gets a leading dim of 1.
    std::string xin = x;
    if (axis == 0) {
      xin = tmp();
      add("unsqueeze", {{"X", {x}}}, {{"Out", {xin}}}, {{"axes", Attribute(std::vector<int32_t>{0})}});
    }
    std::vector<SlotArgs> ins = {{"X", {xin}}, {"Scale", {flat(1)}}};
    if (has_in(2)) ins.push_back({"Bias", {flat(2)}});
    const std::string mean = tmp(), var = tmp();
    const float eps = af("epsilon", 1e-5f);
    const std::string y = axis == 0 ? tmp() : out(0);
    add("layer_norm", ins, {{"Y", {y}}, {"Mean", {mean}}, {"Variance", {var}}}, {{"begin_norm_axis", Attribute(int32_t(axis == 0 ? 1 : axis))}, {"epsilon", Attribute(eps)}});
    if (axis == 0) add("squeeze", {{"X", {y}}}, {{"Out", {out(0)}}}, {{"axes", Attribute(std::vector<int32_t>{0})}});
    // ONNX's Mean and InvStdDev keep X's rank, 1 in the normalized dims; oar's statistics are flat [rows].
    if (has_out(1) || has_out(2)) {
      std::vector<int64_t> s;
      for (int i = 0; i < xs.rank(); ++i) s.push_back(i >= axis ? 1 : (xs[i] < 0 ? (i == 0 ? -1 : 0) : xs[i]));
      if (has_out(1)) reshape_to(mean, s, out(1));
      if (has_out(2)) reshape_to(fused_tmp({var}, fmt::format("x0 c:{} add sqrt reciprocal", double(eps))), s, out(2));
    }
  }
  void h_softmax() {
    const bool log = node_->op_type() == "LogSoftmax";
    const std::string x = in(0);
    need_float(x);
    const Shape xs = shape(x);
    const std::string type = log ? "log_softmax" : "softmax";
    if (opset_ >= 13) {
      const int64_t axis = axis_in(ai("axis", -1), xs.rank());
      return add(type, {{"X", {x}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(int32_t(axis))}}), void();
    }
    // Before opset 13: over X flattened to 2-D at axis (default 1).
    const int64_t axis = axis_in(ai("axis", 1), xs.rank());
    if (axis == xs.rank() - 1) return add(type, {{"X", {x}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(int32_t(-1))}}), void();
    for (int i = 1; i < xs.rank(); ++i)
      if (xs[i] < 0) unsupported("softmax over flattened dims of unknown size (before opset 13)");
    std::string f = tmp(), s = tmp();
    add("flatten", {{"X", {x}}}, {{"Out", {f}}}, {{"axis", Attribute(int32_t(axis))}});
    add(type, {{"X", {f}}}, {{"Out", {s}}}, {{"axis", Attribute(int32_t(-1))}});
    std::vector<int64_t> back(xs.begin(), xs.end());
    back[0] = xs[0] < 0 ? -1 : xs[0];
    reshape_to(s, back, out(0));
  }

  // ---- handlers: shapes and indexing

  void h_constant() {
    if (auto* a = attr("value")) return set_const(0, detail::from_proto(a->t(), fmt::format("{}: {}", what_, where())));
    if (auto* a = attr("value_float")) return set_const(0, Tensor::from<float>({a->f()}, Shape{}));
    if (auto* a = attr("value_int")) return set_const(0, Tensor::from<int64_t>({a->i()}, Shape{}));
    if (auto* a = attr("value_floats")) {
      std::vector<float> v(a->floats().begin(), a->floats().end());
      return set_const(0, Tensor::from<float>(v, Shape{int64_t(v.size())}));
    }
    if (auto* a = attr("value_ints")) {
      std::vector<int64_t> v(a->ints().begin(), a->ints().end());
      return set_const(0, Tensor::from<int64_t>(v, Shape{int64_t(v.size())}));
    }
    unsupported("a Constant other than value, value_float(s) or value_int(s)");
  }
  void h_shape() {
    const Shape s = in_shape(0);
    if (!s.known()) unsupported(fmt::format("the shape {} is not known when the model is imported", s.str()));
    const int r = s.rank();
    int64_t start = norm_axis(ai("start", 0), r), end = attr("end") ? norm_axis(ai("end", r), r) : r;
    start = std::clamp<int64_t>(start, 0, r), end = std::clamp<int64_t>(end, 0, r);
    std::vector<int64_t> v;
    for (int64_t i = start; i < end; ++i) v.push_back(s[int(i)]);
    set_const(0, i64_tensor(v, Shape{int64_t(v.size())}));
  }
  void h_size() {
    const Shape s = in_shape(0);
    if (!s.known()) unsupported(fmt::format("the size of {} is not known when the model is imported", s.str()));
    set_const(0, Tensor::from<int64_t>({s.numel()}, Shape{}));
  }
  void h_constant_of_shape() {
    const auto dims = as_i64(need_const(0, "shape"));
    Shape s(dims);
    Tensor fill = Tensor::from<float>({0.f}, Shape{1});
    if (auto* a = attr("value")) fill = detail::from_proto(a->t(), fmt::format("{}: {}", what_, where()));
    if (s.numel() > (int64_t(1) << 24)) unsupported("a constant of over 16M elements");
    Tensor t(s, fill.dtype());
    const size_t es = size_of(fill.dtype());
    for (int64_t i = 0; i < t.numel(); ++i) std::memcpy(static_cast<char*>(t.raw()) + size_t(i) * es, fill.raw(), es);
    set_const(0, t);
  }
  void h_reshape() {
    auto s = as_i64(need_const(1, "shape"));
    if (ai("allowzero", 0) != 0 && std::count(s.begin(), s.end(), 0) > 0) unsupported("allowzero with a 0 in the shape");
    if (const Tensor* t = const_in(0)) {  // a constant reshaped: computed here
      const Shape& in = t->shape();
      int64_t known = 1, minus = -1;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == 0) s[i] = in[int(i)];
        if (s[i] == -1) minus = int64_t(i);
        else known *= s[i];
      }
      if (minus >= 0) s[size_t(minus)] = known ? t->numel() / known : 0;
      return set_reshaped_const(t->clone().view(Shape(s)));
    }
    reshape_to(in(0), s, out(0));
  }
  void h_flatten() {
    const Shape xs = in_shape(0);
    const int64_t axis = ai("axis", 1) < 0 ? ai("axis", 1) + xs.rank() : ai("axis", 1);
    if (axis < 0 || axis > xs.rank()) fail(fmt::format("axis {} is out of range for rank {}", ai("axis", 1), xs.rank()));
    if (axis == 0) return reshape_to(in(0), {1, -1}, out(0));
    if (axis == xs.rank()) return reshape_to(in(0), {-1, 1}, out(0));
    add("flatten", {{"X", {in(0)}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(int32_t(axis))}});
  }
  void h_transpose() {
    const int r = in_shape(0).rank();
    auto perm = ais("perm");
    if (perm.empty())
      for (int i = r - 1; i >= 0; --i) perm.push_back(i);
    add("transpose", {{"X", {in(0)}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(i32(perm))}});
  }
  void h_concat() {
    const int r = in_shape(0).rank();
    const int64_t axis = axis_in(ai("axis", 0), r);
    if (all_const()) {  // shapes and index lists: 1-D constants joined here
      if (r == 1) {
        std::vector<int64_t> v;
        DType dt = in_dtype(0);
        if (is_integer(dt)) {
          for (int i = 0; i < num_in(); ++i) {
            auto p = as_i64(*const_in(i));
            v.insert(v.end(), p.begin(), p.end());
          }
          return set_const(0, cast_const(i64_tensor(v, Shape{int64_t(v.size())}), dt));
        }
      }
    }
    std::vector<std::string> xs;
    for (int i = 0; i < num_in(); ++i) xs.push_back(in(i));
    add("concat", {{"X", xs}}, {{"Out", {out(0)}}}, {{"axis", Attribute(int32_t(axis))}});
  }
  std::vector<int64_t> axes_arg(int input) const {
    if (opset_ >= 13) return has_in(input) ? as_i64(need_const(input, "axes")) : std::vector<int64_t>{};
    return ais("axes");
  }
  void h_squeeze() {
    const Shape xs = in_shape(0);
    auto axes = axes_arg(1);
    for (auto& a : axes) a = axis_in(a, xs.rank());
    if (const Tensor* t = const_in(0)) {
      Shape s;
      for (int i = 0; i < xs.rank(); ++i)
        if (axes.empty() ? xs[i] != 1 : std::find(axes.begin(), axes.end(), i) == axes.end()) s.push_back(xs[i]);
      return set_reshaped_const(t->clone().view(s));
    }
    add("squeeze", {{"X", {in(0)}}}, {{"Out", {out(0)}}}, {{"axes", Attribute(i32(axes))}});
  }
  void h_unsqueeze() {
    const Shape xs = in_shape(0);
    auto axes = axes_arg(1);
    const int r = xs.rank() + int(axes.size());
    for (auto& a : axes) a = axis_in(a, r);
    std::sort(axes.begin(), axes.end());
    if (const Tensor* t = const_in(0)) {
      Shape s;
      for (int i = 0, j = 0; i < r; ++i) s.push_back(std::binary_search(axes.begin(), axes.end(), i) ? 1 : xs[j++]);
      return set_reshaped_const(t->clone().view(s));
    }
    add("unsqueeze", {{"X", {in(0)}}}, {{"Out", {out(0)}}}, {{"axes", Attribute(i32(axes))}});
  }
  void h_gather() {
    const Shape xs = in_shape(0);
    const int64_t axis = axis_in(ai("axis", 0), xs.rank());
    if (const Tensor* data = const_in(0); data && const_in(1) && xs.rank() == 1 && is_integer(data->dtype())) {  // shape arithmetic
      auto d = as_i64(*data), idx = as_i64(*const_in(1));
      std::vector<int64_t> v;
      for (auto i : idx) {
        if (i < -int64_t(d.size()) || i >= int64_t(d.size())) fail(fmt::format("index {} is out of range for {} values", i, d.size()));
        v.push_back(d[size_t(i < 0 ? i + int64_t(d.size()) : i)]);
      }
      return set_const(0, cast_const(i64_tensor(v, const_in(1)->shape()), data->dtype()));
    }
    if (axis != 0) unsupported(fmt::format("axis {} (oar gathers along axis 0)", axis));
    const Shape is = in_shape(1);
    std::string idx;
    if (const Tensor* t = const_in(1)) {  // negative indices count from the end: wrapped here
      if (xs[0] < 0) unsupported("indices into a dim of unknown size");
      Tensor w = cast_const(*t, DType::i64);
      for (int64_t i = 0; i < w.numel(); ++i)
        if (w.data<int64_t>()[i] < 0) w.data<int64_t>()[i] += xs[0];
      const_[in_name(1) + "/wrapped"] = w;
      idx = materialize(in_name(1) + "/wrapped");
    } else {
      // At run time: i + n (1 - sign(i + 1/2)) / 2 in f64 (exact for any index), back to the index type.
      if (xs[0] < 0) unsupported("indices into a dim of unknown size");
      const DType it = dtype(in(1));
      std::string f = cast_to(in(1), DType::f64), sgn = tmp();
      add("fused_elementwise", {{"X", {f}}}, {{"Out", {sgn}}}, {{"expression", Attribute(std::string("x0 c:0.5 add"))}});
      std::string sg = tmp();
      add("sign", {{"X", {sgn}}}, {{"Out", {sg}}});
      std::string wrapped = fused_tmp({f, sg}, fmt::format("x0 c:1 x1 sub c:{} mul add", double(xs[0]) / 2));
      idx = cast_to(wrapped, it);
    }
    if (is.rank() == 1) return add("gather", {{"X", {in(0)}}, {"Index", {idx}}}, {{"Out", {out(0)}}}), void();
    if (!is.known()) unsupported(fmt::format("indices of rank {} and unknown shape", is.rank()));
    std::string flat = tmp(), g = tmp();
    reshape_to(idx, {-1}, flat);
    add("gather", {{"X", {in(0)}}, {"Index", {flat}}}, {{"Out", {g}}});
    std::vector<int64_t> s(is.begin(), is.end());
    for (int i = 1; i < xs.rank(); ++i) s.push_back(xs[i] < 0 ? 0 : xs[i]);
    if (std::count(s.begin() + is.rank(), s.end(), 0) > 1) unsupported("data with several dims of unknown size");
    reshape_to(g, s, out(0));
  }
  void h_cast() {
    const DType to = oar_dtype_or_unsupported(int32_t(ai("to", 0)), "Cast's to");
    if (const Tensor* t = const_in(0)) return set_const(0, cast_const(*t, to));
    const std::string x = in(0);
    need_castable(dtype(x), to);
    add("cast", {{"X", {x}}}, {{"Out", {out(0)}}}, {{"in_dtype", Attribute(int32_t(dtype(x)))}, {"out_dtype", Attribute(int32_t(to))}});
  }
  void h_slice() {
    const Shape xs = in_shape(0);
    std::vector<int64_t> starts, ends, axes, steps;
    if (opset_ < 10) {
      starts = ais("starts"), ends = ais("ends"), axes = ais("axes");
    } else {
      starts = as_i64(need_const(1, "starts")), ends = as_i64(need_const(2, "ends"));
      if (has_in(3)) axes = as_i64(need_const(3, "axes"));
      if (has_in(4)) steps = as_i64(need_const(4, "steps"));
    }
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(int64_t(i));
    for (auto& a : axes) a = axis_in(a, xs.rank());
    for (auto s : steps)
      if (s != 1) unsupported(fmt::format("steps [{}] (oar slices with step 1)", fmt::join(steps, ", ")));
    add("slice", {{"Input", {in(0)}}}, {{"Out", {out(0)}}}, {{"axes", Attribute(i32(axes))}, {"starts", Attribute(i32(starts))}, {"ends", Attribute(i32(ends))}});
  }
  void h_reduce() {
    static const std::map<std::string, std::string> base = {{"ReduceSum", "reduce_sum"}, {"ReduceMean", "reduce_mean"}, {"ReduceMax", "reduce_max"},
                                                            {"ReduceMin", "reduce_min"}, {"ReduceSumSquare", "reduce_sum"}, {"ReduceL1", "reduce_sum"},
                                                            {"ReduceL2", "reduce_sum"}, {"ReduceLogSum", "reduce_sum"}, {"ReduceLogSumExp", "reduce_sum"}};
    const std::string& t = node_->op_type();
    std::string x = in(0);
    need_float(x);
    const Shape xs = shape(x);
    if (t == "ReduceProd") return reduce_prod(x);
    std::vector<int64_t> axes = t == "ReduceSum" && opset_ >= 13 ? (has_in(1) ? as_i64(need_const(1, "axes")) : std::vector<int64_t>{}) : ais("axes");
    const bool keep = ai("keepdims", 1) != 0;
    if (axes.empty() && ai("noop_with_empty_axes", 0) != 0) return add("assign", {{"X", {x}}}, {{"Out", {out(0)}}}), void();
    for (auto& a : axes) a = axis_in(a, xs.rank());
    // Element-wise before the sum, and after it.
    if (t == "ReduceSumSquare" || t == "ReduceL2") x = fused_tmp({x}, "x0 square");
    if (t == "ReduceL1") x = fused_tmp({x}, "x0 abs");
    if (t == "ReduceLogSumExp") x = fused_tmp({x}, "x0 exp");
    const bool post = t == "ReduceL2" || t == "ReduceLogSum" || t == "ReduceLogSumExp";
    const bool all = axes.empty() || axes.size() == size_t(xs.rank());
    const bool scalar = all && !keep;  // ONNX gives rank 0, oar's reduce [1]
    std::string r = post || scalar ? tmp() : out(0);
    add(base.at(t), {{"X", {x}}}, {{"Out", {r}}},
        {{"dim", Attribute(i32(axes))}, {"keep_dim", Attribute(keep)}, {"reduce_all", Attribute(axes.empty())}});
    if (post) {
      std::string p = scalar ? tmp() : out(0);
      fused({r}, t == "ReduceL2" ? "x0 sqrt" : "x0 log", p);
      r = p;
    }
    if (scalar) reshape_to(r, {}, out(0));
  }
  /// exp(sum log |x|), negated when an odd number of the factors is negative: cos(pi * count).
  void reduce_prod(const std::string& x) {
    const Shape xs = shape(x);
    std::vector<int64_t> axes = ais("axes");
    const bool keep = ai("keepdims", 1) != 0;
    for (auto& a : axes) a = axis_in(a, xs.rank());
    const bool scalar = (axes.empty() || axes.size() == size_t(xs.rank())) && !keep;
    const std::map<std::string, Attribute> red = {{"dim", Attribute(i32(axes))}, {"keep_dim", Attribute(keep)}, {"reduce_all", Attribute(axes.empty())}};
    std::string logs = tmp(), negs = tmp(), sg = tmp();
    add("reduce_sum", {{"X", {fused_tmp({x}, "x0 abs log")}}}, {{"Out", {logs}}}, red);
    add("sign", {{"X", {x}}}, {{"Out", {sg}}});
    add("reduce_sum", {{"X", {fused_tmp({sg}, "c:1 x0 sub c:0.5 mul")}}}, {{"Out", {negs}}}, red);
    const std::string expr = fmt::format("x0 exp x1 c:{} mul cos mul", std::numbers::pi);
    if (!scalar) return fused({logs, negs}, expr, out(0));
    reshape_to(fused_tmp({logs, negs}, expr), {}, out(0));
  }
  void h_arg() {
    const std::string x = in(0);
    need_float(x);
    const int64_t axis = axis_in(ai("axis", 0), rank(x));
    const std::map<std::string, Attribute> attrs = {{"axis", Attribute(axis)}, {"keepdims", Attribute(ai("keepdims", 1) != 0)}};
    const std::string type = node_->op_type() == "ArgMax" ? "arg_max" : "arg_min";
    if (ai("select_last_index", 0) == 0) return add(type, {{"X", {x}}}, {{"Out", {out(0)}}}, attrs), void();
    // The last of equal extremes: the first one in X reversed along the axis, counted back: n - 1 - i.
    const int64_t n = shape(x)[int(axis)];
    std::string r = tmp(), neg = tmp();
    add(type, {{"X", {reverse(x, int(axis))}}}, {{"Out", {r}}}, attrs);
    add("elementwise_mul", {{"X", {r}}, {"Y", {const_var("minus1", i64_tensor({-1}, Shape{1}))}}}, {{"Out", {neg}}}, {{"axis", Attribute(int32_t(-1))}});
    add("elementwise_add", {{"X", {neg}}, {"Y", {const_var("last", i64_tensor({n - 1}, Shape{1}))}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(int32_t(-1))}});
  }
  void h_gather_elements() {  // out[..i..] = data[..indices[..i..]..] along axis: a one-hot product summed
    const std::string data = in(0);
    const Shape ds = shape(data), is = in_shape(1);
    const int r = ds.rank();
    const int64_t axis = axis_in(ai("axis", 0), r);
    if (is.rank() != r || !ds.known() || !is.known()) unsupported(fmt::format("data {} and indices {} (oar needs known shapes of one rank)", ds.str(), is.str()));
    for (int i = 0; i < r; ++i)
      if (i != axis && is[i] != ds[i]) unsupported(fmt::format("indices {} narrower than data {} off the axis", is.str(), ds.str()));
    const int64_t n = ds[int(axis)], m = is[int(axis)], rows = ds.numel() / n;
    const auto perm = axis_last(r, axis);
    std::string d = transposed(to_f64_if_int(data), perm);
    std::string idx = transposed(wrap_negative(in(1), n), perm);
    std::string i2 = tmp(), hot = tmp(), hot3 = tmp(), d3 = tmp(), sum = tmp(), back = tmp();
    reshape_to(idx, {-1, 1}, i2);
    add("one_hot", {{"X", {i2}}}, {{"Out", {hot}}}, {{"depth", Attribute(int32_t(n))}, {"dtype", Attribute(int32_t(dtype(d)))}});
    reshape_to(hot, {rows, m, n}, hot3);
    reshape_to(d, {rows, 1, n}, d3);
    add("reduce_sum", {{"X", {fused_tmp({d3, hot3}, "x0 x1 mul")}}}, {{"Out", {sum}}},
        {{"dim", Attribute(std::vector<int32_t>{2})}, {"keep_dim", Attribute(false)}, {"reduce_all", Attribute(false)}});
    std::vector<int64_t> moved;
    for (auto p : perm) moved.push_back(is[int(p)]);
    reshape_to(sum, moved, back);
    out_like(transposed(back, inverse(perm)), data);
  }
  void h_cumsum() {  // along the axis (moved last): a product with a triangle of ones
    const std::string x = in(0);
    const Shape xs = shape(x);
    const int64_t axis = axis_in(int64_t(need_const(1, "axis").get(0)), xs.rank());
    const int64_t n = xs[int(axis)];
    if (n < 0) unsupported(fmt::format("a cumulative sum over a dim of unknown size in {}", xs.str()));
    const bool excl = ai("exclusive", 0) != 0, rev = ai("reverse", 0) != 0;
    std::string f = to_f64_if_int(x);
    std::vector<double> t(static_cast<size_t>(n * n));
    for (int64_t i = 0; i < n; ++i)  // y_j = sum_i x_i T[i][j]
      for (int64_t j = 0; j < n; ++j) t[size_t(i * n + j)] = rev ? (excl ? i > j : i >= j) : (excl ? i < j : i <= j);
    const auto perm = axis_last(xs.rank(), axis);
    std::string v = transposed(f, perm), y = tmp();
    add("matmul", {{"X", {v}}, {"Y", {const_var("cumsum", cast_const(Tensor::from<double>(t, Shape{n, n}), dtype(f)))}}}, {{"Out", {y}}});
    out_like(transposed(y, inverse(perm)), x);
  }
  void h_onehot() {  // off + (on - off) one_hot(index, depth), the new dim moved to `axis`
    const std::string idx = in(0);
    const int64_t depth = int64_t(need_const(1, "depth").get(0));
    const Tensor& values = need_const(2, "values");
    if (values.numel() != 2) fail(fmt::format("values must hold [off, on], got {}", values.numel()));
    const Shape is = shape(idx);
    if (std::count(is.begin(), is.end(), int64_t(-1)) > 1) unsupported(fmt::format("indices {} with several dims of unknown size", is.str()));
    const DType vt = values.dtype();
    if (vt != DType::f32 && vt != DType::f64) unsupported(fmt::format("values of {}", name(vt)));
    std::string i2 = tmp(), hot = tmp(), full = tmp();
    reshape_to(wrap_negative(idx, depth), {-1, 1}, i2);
    add("one_hot", {{"X", {i2}}}, {{"Out", {hot}}}, {{"depth", Attribute(int32_t(depth))}, {"dtype", Attribute(int32_t(vt))}});
    const double off = values.get(0), on = values.get(1);
    std::vector<int64_t> s(is.begin(), is.end());
    s.push_back(depth);
    reshape_to(fused_tmp({hot}, fmt::format("x0 c:{} mul c:{} add", on - off, off)), s, full);
    const int r = is.rank() + 1;
    const int64_t axis = axis_in(ai("axis", -1), r);
    std::vector<int64_t> perm;  // the last dim to `axis`
    for (int i = 0, k = 0; i < r; ++i) perm.push_back(i == axis ? r - 1 : k++);
    add("assign", {{"X", {transposed(full, perm)}}}, {{"Out", {out(0)}}});
  }
  void h_range() {
    if (!all_const()) unsupported("Range over values computed at run time");
    const double start = const_in(0)->get(0), limit = const_in(1)->get(0), delta = const_in(2)->get(0);
    if (delta == 0) fail("delta is 0");
    const int64_t n = std::max<int64_t>(0, int64_t(std::ceil((limit - start) / delta)));
    if (n > (int64_t(1) << 24)) unsupported("a range of over 16M elements");
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = start + double(i) * delta;
    set_const(0, cast_const(Tensor::from<double>(v, Shape{n}), const_in(0)->dtype()));
  }
  void h_expand() {  // X broadcast to a shape: a fused expression that reads X and takes its shape from zeros
    const auto dims = as_i64(need_const(1, "shape"));
    const std::string x = in(0);
    need_float(x);
    Tensor z(Shape(dims), dtype(x));
    std::memset(z.raw(), 0, z.bytes());
    const std::string zn = in_name(1) + "/zeros";
    const_[zn] = z;
    fused({x, materialize(zn)}, "x0", out(0));
  }
  /// NegativeLogLikelihoodLoss over log-probabilities `x` [N, C, d1..dk] and class indices `target`
  /// [N, d1..dk], with optional class weights and ignore_index, into output 0: the class axis moved last and
  /// flattened to [M, C]; loss_m = -x[m, t_m] w_m with w_m = weight[t_m] (or 1), 0 where t_m is ignored (the
  /// index made 0 there, so that it stays in range); reduction none, sum, or mean = sum / sum of w.
  void nll(const std::string& x, const std::string& target, const std::string& weight) {
    need_float(x);
    const Shape xs = shape(x), ts = shape(target);
    const DType dt = dtype(x);
    if (xs.rank() < 2) fail(fmt::format("needs scores [N, C, ...], got {}", xs.str()));
    const int64_t classes = xs[1];
    if (classes < 0) unsupported("a class dim of unknown size");
    for (int i = 2; i < xs.rank(); ++i)
      if (xs[i] < 0) unsupported(fmt::format("scores {} with dims of unknown size", xs.str()));
    if (!is_integer(dtype(target))) fail(fmt::format("takes class indices, got {}", name(dtype(target))));
    std::string scores = x;
    if (xs.rank() > 2) {
      std::vector<int64_t> perm = {0};
      for (int i = 2; i < xs.rank(); ++i) perm.push_back(i);
      perm.push_back(1);
      std::string t = tmp();
      add("transpose", {{"X", {x}}}, {{"Out", {t}}}, {{"axis", Attribute(i32(perm))}});
      scores = t;
    }
    std::string flat = tmp(), idx = tmp();
    reshape_to(scores, {-1, classes}, flat);
    std::string t64 = dtype(target) == DType::i64 ? target : cast_to(target, DType::i64);
    reshape_to(t64, {-1, 1}, idx);  // [M, 1]
    std::string keep;  // 1 where the target counts, in x's dtype
    if (attr("ignore_index")) {
      const std::string ii = in_name(1) + "/ignore_index";
      const_[ii] = Tensor::from<int64_t>({ai("ignore_index", 0)}, Shape{1});
      std::string ne = tmp();
      add("not_equal", {{"X", {idx}}, {"Y", {materialize(ii)}}}, {{"Out", {ne}}}, {{"axis", Attribute(int32_t(-1))}});
      std::string safe = tmp();
      add("elementwise_mul", {{"X", {idx}}, {"Y", {cast_to(ne, DType::i64)}}}, {{"Out", {safe}}}, {{"axis", Attribute(int32_t(-1))}});
      idx = safe;
      keep = cast_to(ne, dt);  // [M, 1]
    }
    std::string hot = tmp();
    add("one_hot", {{"X", {idx}}}, {{"Out", {hot}}}, {{"depth", Attribute(int32_t(classes))}, {"dtype", Attribute(int32_t(dt))}});
    std::string picked = tmp();  // [M, 1]: -x[m, t_m]
    add("reduce_sum", {{"X", {fused_tmp({flat, hot}, "x0 x1 mul neg")}}}, {{"Out", {picked}}},
        {{"dim", Attribute(std::vector<int32_t>{1})}, {"keep_dim", Attribute(true)}, {"reduce_all", Attribute(false)}});
    std::string w = keep;
    if (!weight.empty()) {
      std::string flat_idx = tmp(), wm = tmp(), wm2 = tmp();
      reshape_to(idx, {-1}, flat_idx);
      add("gather", {{"X", {weight}}, {"Index", {flat_idx}}}, {{"Out", {wm}}});
      reshape_to(wm, {-1, 1}, wm2);
      w = keep.empty() ? wm2 : fused_tmp({wm2, keep}, "x0 x1 mul");
    }
    std::string loss = w.empty() ? picked : fused_tmp({picked, w}, "x0 x1 mul");
    const std::string reduction = as("reduction", "mean");
    if (reduction == "none") {
      std::vector<int64_t> back = {ts[0] < 0 ? -1 : ts[0]};
      for (int i = 1; i < ts.rank(); ++i) back.push_back(ts[i]);
      return reshape_to(loss, back, out(0));
    }
    auto total = [&](const std::string& v) {
      std::string r = tmp();
      add("reduce_sum", {{"X", {v}}}, {{"Out", {r}}}, {{"dim", Attribute(std::vector<int32_t>{})}, {"keep_dim", Attribute(false)}, {"reduce_all", Attribute(true)}});
      return r;
    };
    std::string r;
    if (reduction == "sum") r = total(loss);
    else if (reduction == "mean") r = w.empty() ? [&] { std::string m = tmp(); add("mean", {{"X", {loss}}}, {{"Out", {m}}}); return m; }()
                                                : fused_tmp({total(loss), total(w)}, "x0 x1 div");
    else fail(fmt::format("reduction '{}' is not one of none, sum, mean", reduction));
    reshape_to(r, {}, out(0));  // a scalar, as ONNX's reduced loss is
  }
  void h_nll() { nll(in(0), in(1), has_in(2) ? in(2) : std::string()); }
  void h_softmax_xent() {  // log_softmax over the class axis, then the NLL; log_prob (output 1) when asked
    const std::string x = in(0);
    need_float(x);
    const std::string lp = has_out(1) ? out(1) : tmp();
    add("log_softmax", {{"X", {x}}}, {{"Out", {lp}}}, {{"axis", Attribute(int32_t(1))}});
    nll(lp, in(1), has_in(2) ? in(2) : std::string());
  }
  void h_sign() { unary_op("sign"); }
  void h_thresholded_relu() {  // x where x > alpha, else 0
    const std::string x = in(0);
    need_float(x);
    std::string gt = tmp();
    add("greater_than", {{"X", {x}}, {"Y", {const_var("alpha", cast_const(Tensor::from<double>({double(af("alpha", 1.0f))}, Shape{1}), dtype(x)))}}},
        {{"Out", {gt}}}, {{"axis", Attribute(int32_t(-1))}});
    fused({x, cast_to(gt, dtype(x))}, "x0 x1 mul", out(0));
  }
  void h_celu() {  // max(0, x) + min(0, alpha (e^(x / alpha) - 1))
    const double a = af("alpha", 1.0f);
    fused({in(0)}, fmt::format("x0 relu x0 c:{} div exp c:1 sub c:{} mul c:0 min add", a, a), out(0));
  }
  void h_where() {  // c x + (1 - c) y with the condition as 0 or 1: exact for finite x and y
    const std::string x = in(1), y = in(2);
    const DType dt = dtype(x);
    if (dt == DType::i32 || dt == DType::i64) {  // in f64, exact for integers below 2^53
      std::string r = fused_tmp({cast_to(in(0), DType::f64), cast_to(x, DType::f64), cast_to(y, DType::f64)}, "x0 x1 mul c:1 x0 sub x2 mul add");
      out_as(r, dt);
      return;
    }
    need_float(x);
    fused({cast_to(in(0), dt), x, y}, "x0 x1 mul c:1 x0 sub x2 mul add", out(0));
  }
  void h_topk() {
    const std::string x = in(0);
    const int r = rank(x);
    if (axis_in(ai("axis", -1), r) != r - 1) unsupported("an axis other than the last");
    if (ai("largest", 1) != 1) unsupported("largest 0 (the k smallest)");
    if (ai("sorted", 1) != 1) unsupported("sorted 0");
    const int64_t k = opset_ >= 10 ? int64_t(need_const(1, "K").get(0)) : ai("k", 1);
    add("top_k", {{"X", {x}}}, {{"Out", {out(0)}}, {"Indices", {has_out(1) ? out(1) : tmp()}}}, {{"k", Attribute(int32_t(k))}});
  }
  /// DepthToSpace and SpaceToDepth: a reshape to 6 dims, a transpose, a reshape back (the batch may be unknown).
  void h_depth_space() {
    const std::string x = in(0);
    const Shape xs = shape(x);
    if (xs.rank() != 4) fail(fmt::format("needs an [N, C, H, W] input, got {}", xs.str()));
    for (int i = 1; i < 4; ++i)
      if (xs[i] < 0) unsupported(fmt::format("input {} with dims of unknown size", xs.str()));
    const int64_t b = ai("blocksize", 0), c = xs[1], h = xs[2], w = xs[3];
    if (b <= 0) fail("needs a blocksize > 0");
    std::vector<int64_t> s1, perm, s2;
    if (node_->op_type() == "DepthToSpace") {
      if (c % (b * b)) fail(fmt::format("channels {} are not a multiple of blocksize^2 = {}", c, b * b));
      if (as("mode", "DCR") == "DCR") s1 = {0, b, b, c / (b * b), h, w}, perm = {0, 3, 4, 1, 5, 2};
      else s1 = {0, c / (b * b), b, b, h, w}, perm = {0, 1, 4, 2, 5, 3};
      s2 = {0, c / (b * b), h * b, w * b};
    } else {
      if (h % b || w % b) fail(fmt::format("H {} and W {} are not multiples of blocksize {}", h, w, b));
      s1 = {0, c, h / b, b, w / b, b}, perm = {0, 3, 5, 1, 2, 4}, s2 = {0, c * b * b, h / b, w / b};
    }
    std::string r = tmp(), t = tmp();
    reshape_to(x, s1, r);
    add("transpose", {{"X", {r}}}, {{"Out", {t}}}, {{"axis", Attribute(i32(perm))}});
    reshape_to(t, s2, out(0));
  }
  void h_instance_norm() {  // per example and channel over the spatial dims: scale (x - mean) / sqrt(var + eps) + B
    const std::string x = in(0);
    need_float(x);
    const Shape xs = shape(x);
    if (xs.rank() < 3) fail(fmt::format("needs [N, C, D1, ...], got {}", xs.str()));
    std::vector<int32_t> axes;
    for (int i = 2; i < xs.rank(); ++i) axes.push_back(i);
    auto per_channel = [&](int i) {  // [C] -> [C, 1, ...] for numpy's broadcast over [N, C, D1, ...]
      std::vector<int64_t> s = {-1};
      for (int k = 2; k < xs.rank(); ++k) s.push_back(1);
      std::string o = tmp();
      reshape_to(in(i), s, o);
      return o;
    };
    const std::map<std::string, Attribute> red = {{"dim", Attribute(axes)}, {"keep_dim", Attribute(true)}, {"reduce_all", Attribute(false)}};
    std::string mean = tmp();
    add("reduce_mean", {{"X", {x}}}, {{"Out", {mean}}}, red);
    std::string d = fused_tmp({x, mean}, "x0 x1 sub");
    std::string var = tmp();
    add("reduce_mean", {{"X", {fused_tmp({d}, "x0 square")}}}, {{"Out", {var}}}, red);
    fused({d, var, per_channel(1), per_channel(2)}, fmt::format("x0 x1 c:{} add sqrt div x2 mul x3 add", double(af("epsilon", 1e-5f))), out(0));
  }
  void h_eye_like() {  // ones on the k-th diagonal of X's [rows, cols] shape
    const Shape xs = in_shape(0);
    if (xs.rank() != 2 || !xs.known()) fail(fmt::format("needs a 2-D input of known shape, got {}", xs.str()));
    const DType dt = attr("dtype") ? oar_dtype_or_unsupported(int32_t(ai("dtype", 1)), "EyeLike's dtype") : in_dtype(0);
    const int64_t k = ai("k", 0);
    std::vector<double> v(size_t(xs.numel()), 0.0);
    for (int64_t r = 0; r < xs[0]; ++r)
      if (r + k >= 0 && r + k < xs[1]) v[size_t(r * xs[1] + r + k)] = 1;
    set_const(0, cast_const(Tensor::from<double>(v, xs), dt));
  }
  void h_isnan() {  // x != x
    const std::string x = in(0);
    add("not_equal", {{"X", {x}}, {"Y", {x}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(int32_t(-1))}});
  }
  void h_isinf() {  // x == +inf or x == -inf, as asked
    const std::string x = in(0);
    need_float(x);
    const bool pos = ai("detect_positive", 1) != 0, neg = ai("detect_negative", 1) != 0;
    if (!pos && !neg) unsupported("detect_positive and detect_negative both 0");
    auto eq = [&](double v, const std::string& o) {
      const_[in_name(0) + (v > 0 ? "/+inf" : "/-inf")] = cast_const(Tensor::from<double>({v}, Shape{1}), dtype(x));
      add("equal", {{"X", {x}}, {"Y", {materialize(in_name(0) + (v > 0 ? "/+inf" : "/-inf"))}}}, {{"Out", {o}}}, {{"axis", Attribute(int32_t(-1))}});
    };
    const double inf = std::numeric_limits<double>::infinity();
    if (pos && neg) {
      std::string a = tmp(), b = tmp();
      eq(inf, a), eq(-inf, b);
      add("logical_or", {{"X", {a}}, {"Y", {b}}}, {{"Out", {out(0)}}});
    } else if (pos || neg) {
      eq(pos ? inf : -inf, out(0));
    } else {
      unsupported("detect_positive and detect_negative both 0");
    }
  }
  void h_tile() {  // each axis repeated by concatenating copies
    std::string x = in(0);
    const auto reps = as_i64(need_const(1, "repeats"));
    if (int(reps.size()) != rank(x)) fail(fmt::format("has {} repeats for rank {}", reps.size(), rank(x)));
    for (size_t a = 0; a < reps.size(); ++a) {
      if (reps[a] < 1) unsupported(fmt::format("repeats {} (oar tiles by 1 or more)", reps[a]));
      if (reps[a] == 1) continue;
      const bool last = std::all_of(reps.begin() + long(a) + 1, reps.end(), [](int64_t r) { return r == 1; });
      std::string o = last ? out(0) : tmp();
      add("concat", {{"X", std::vector<std::string>(size_t(reps[a]), x)}}, {{"Out", {o}}}, {{"axis", Attribute(int32_t(a))}});
      x = o;
    }
    if (std::all_of(reps.begin(), reps.end(), [](int64_t r) { return r == 1; })) add("assign", {{"X", {x}}}, {{"Out", {out(0)}}});
  }
  void h_cast_like() {
    const DType to = in_dtype(1);
    if (const Tensor* t = const_in(0)) return set_const(0, cast_const(*t, to));
    const std::string x = in(0);
    need_castable(dtype(x), to);
    add("cast", {{"X", {x}}}, {{"Out", {out(0)}}}, {{"in_dtype", Attribute(int32_t(dtype(x)))}, {"out_dtype", Attribute(int32_t(to))}});
  }
  void h_trilu() {  // X times a constant mask of its last two dims (upper: j - i >= k; lower: j - i <= k)
    const std::string x = in(0);
    const Shape xs = shape(x);
    if (xs.rank() < 2 || xs[xs.rank() - 1] < 0 || xs[xs.rank() - 2] < 0) unsupported(fmt::format("input {} (its last two dims must be known)", xs.str()));
    const bool upper = ai("upper", 1) != 0;
    const int64_t rows = xs[xs.rank() - 2], cols = xs[xs.rank() - 1];
    if (has_in(1) && !const_in(1)) {  // k at run time: the mask from sign(j - i - k + 1/2) (upper) or sign(k - (j - i) + 1/2)
      std::vector<double> d(static_cast<size_t>(rows * cols));
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) d[size_t(i * cols + j)] = double(j - i);
      std::string dv = const_var("trilu_diag", Tensor::from<double>(d, Shape{rows, cols})), sg = tmp();
      add("sign", {{"X", {fused_tmp({dv, cast_to(in(1), DType::f64)}, upper ? "x0 x1 sub c:0.5 add" : "x1 x0 sub c:0.5 add")}}}, {{"Out", {sg}}});
      const std::string xf = dtype(x) == DType::f64 ? x : cast_to(to_f64_if_int(x), DType::f64);  // the mask is f64
      return out_like(fused_tmp({xf, sg}, "x0 x1 c:1 add c:0.5 mul mul"), x);
    }
    const int64_t k = has_in(1) ? int64_t(need_const(1, "k").get(0)) : 0;
    std::vector<double> m(static_cast<size_t>(rows * cols));
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) m[size_t(i * cols + j)] = (upper ? j - i >= k : j - i <= k) ? 1 : 0;
    const DType dt = dtype(x);
    const bool ints = dt == DType::i32 || dt == DType::i64;
    const std::string mn = in_name(0) + "/trilu_mask";
    const_[mn] = cast_const(Tensor::from<double>(m, Shape{rows, cols}), ints ? DType::f64 : dt);
    if (!ints) return fused({x, materialize(mn)}, "x0 x1 mul", out(0));
    std::string r = fused_tmp({cast_to(x, DType::f64), materialize(mn)}, "x0 x1 mul");
    out_as(r, dt);
  }
  void h_hardmax() {  // one-hot of the first largest along the axis (before opset 13: of X flattened at axis)
    const std::string x = in(0);
    need_float(x);
    const Shape xs = shape(x);
    const int64_t axis = axis_in(ai("axis", opset_ >= 13 ? -1 : 1), xs.rank());
    if (!xs.known()) unsupported(fmt::format("input {} of unknown shape", xs.str()));
    std::vector<int64_t> s2;  // X as [rows, n] with the axis (or the flattened tail) last
    std::string v = x;
    std::vector<int64_t> perm;
    if (opset_ < 13) {
      s2 = {xs.numel(0, int(axis)), xs.numel(int(axis), xs.rank())};
    } else {
      for (int i = 0; i < xs.rank(); ++i)
        if (i != axis) perm.push_back(i);
      perm.push_back(axis);
      if (axis != xs.rank() - 1) {
        v = tmp();
        add("transpose", {{"X", {x}}}, {{"Out", {v}}}, {{"axis", Attribute(i32(perm))}});
      }
      s2 = {xs.numel() / xs[int(axis)], xs[int(axis)]};
    }
    std::string flat = tmp(), am = tmp(), hot = tmp();
    reshape_to(v, s2, flat);
    add("arg_max", {{"X", {flat}}}, {{"Out", {am}}}, {{"axis", Attribute(int64_t(1))}, {"keepdims", Attribute(true)}});
    add("one_hot", {{"X", {am}}}, {{"Out", {hot}}}, {{"depth", Attribute(int32_t(s2[1]))}, {"dtype", Attribute(int32_t(dtype(x)))}});
    if (opset_ < 13 || axis == xs.rank() - 1) return reshape_to(hot, std::vector<int64_t>(xs.begin(), xs.end()), out(0));
    std::vector<int64_t> moved;  // X's dims in the transposed order, then back
    for (auto p : perm) moved.push_back(xs[int(p)]);
    std::string r = tmp();
    reshape_to(hot, moved, r);
    std::vector<int64_t> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int64_t(i);
    add("transpose", {{"X", {r}}}, {{"Out", {out(0)}}}, {{"axis", Attribute(i32(inv))}});
  }
  void h_mod() {  // fmod 0: a - b floor(a / b) (the sign of b); fmod 1: a - b trunc(a / b) (the sign of a); in f64 for integers
    const std::string a0 = in(0), b0 = in(1);
    const DType dt = dtype(a0);
    const bool ints = dt == DType::i32 || dt == DType::i64;
    if (!ints) need_float(a0);
    const std::string a = ints ? cast_to(a0, DType::f64) : a0, b = ints ? cast_to(b0, DType::f64) : b0;
    std::string r;
    if (ai("fmod", 0) == 0) {
      if (!ints) unsupported("fmod 0 on floats");
      r = fused_tmp({a, b}, "x0 x1 x0 x1 div floor mul sub");
    } else {
      std::string q = fused_tmp({a, b}, "x0 x1 div"), sg = tmp();
      add("sign", {{"X", {q}}}, {{"Out", {sg}}});
      r = fused_tmp({a, b, q, sg}, "x0 x1 x3 x2 abs floor mul mul sub");
    }
    out_as(r, dt);
  }
  /// LSTM and GRU (one direction) as oar's lstm / gru over the sequences: the padded input unpadded by the
  /// lengths into a LoD batch, ONNX's input weights as a projection (oar's lstm and gru take projected input),
  /// the gates reordered into oar's order (GRU: oar's update gate u is ONNX's 1 - z, so z's weights and biases
  /// are negated), the per-step output padded back; Y_h / Y_c are each sequence's last step (first, reversed).
  void h_rnn() {
    const bool lstm = node_->op_type() == "LSTM";
    const std::string dir = as("direction", "forward");
    if (dir != "forward" && dir != "reverse") unsupported(fmt::format("direction {}", dir));
    if (attr("clip")) unsupported("clip");
    if (ai("input_forget", 0) != 0) unsupported("input_forget 1");
    if (!lstm && ai("linear_before_reset", 0) != 0) unsupported("linear_before_reset 1");
    if (auto* a = attr("activations")) {
      std::vector<std::string> got(a->strings().begin(), a->strings().end());
      std::vector<std::string> dflt = lstm ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"} : std::vector<std::string>{"Sigmoid", "Tanh"};
      if (got != dflt) unsupported(fmt::format("activations [{}]", fmt::join(got, ", ")));
    }
    const bool batch_major = ai("layout", 0) == 1;
    const std::string x = in(0);
    need_float(x);
    const Shape xs = shape(x);
    if (xs.rank() != 3) fail(fmt::format("needs X of rank 3, got {}", xs.str()));
    const Shape ws = in_shape(1), rs = in_shape(2);
    const int64_t g = lstm ? 4 : 3, h = rs.rank() == 3 ? rs[2] : -1, in_size = ws.rank() == 3 ? ws[2] : -1;
    if (h <= 0 || in_size <= 0 || ws[0] != 1 || rs[0] != 1 || ws[1] != g * h || rs[1] != g * h)
      fail(fmt::format("has W {} and R {} (one direction of known sizes)", ws.str(), rs.str()));
    const DType dt = dtype(x);
    // oar block k (LSTM c, i, f, o; GRU u, r, c) is ONNX block src[k] (LSTM i, o, f, c; GRU z, r, h) times sgn[k]:
    // ONNX's rows gathered into oar's order and scaled, as ops, so that W, R and B may be computed at run time
    // and, as parameters, are trained through the gather.
    const std::vector<int64_t> src = lstm ? std::vector<int64_t>{3, 0, 2, 1} : std::vector<int64_t>{0, 1, 2};
    std::vector<int64_t> order;
    std::vector<double> sign;
    for (int64_t k = 0; k < g; ++k)
      for (int64_t j = 0; j < h; ++j) order.push_back(src[size_t(k)] * h + j), sign.push_back(!lstm && k == 0 ? -1.0 : 1.0);
    const std::string order_v = const_var("gate_order", i64_tensor(order, Shape{g * h}));
    const std::string sign_v = const_var("gate_sign", cast_const(Tensor::from<double>(sign, Shape{g * h, 1}), dt));
    auto reorder = [&](const std::string& m, int64_t cols) {  // [g*h, cols] in ONNX's order -> oar's, signed
      std::string gathered = tmp();
      add("gather", {{"X", {m}}, {"Index", {order_v}}}, {{"Out", {gathered}}});
      std::string r2 = tmp();
      reshape_to(gathered, {g * h, cols}, r2);
      return fused_tmp({r2, sign_v}, "x0 x1 mul");
    };
    std::string w2 = tmp(), r2 = tmp();
    reshape_to(in(1), {g * h, in_size}, w2);
    reshape_to(in(2), {g * h, h}, r2);
    const std::string wp = transposed(reorder(w2, in_size), {1, 0});  // [I, g*h]: the input projection
    std::string weight = transposed(reorder(r2, h), {1, 0});        // [h, g*h]: h_{t-1} Weight
    if (!lstm) {  // oar's GRU Weight holds W_ur [D, 2D] row-major, then W_c [D, D]
      std::string ur = tmp(), c = tmp(), urf = tmp(), cf = tmp(), both = tmp(), w3 = tmp();
      add("slice", {{"Input", {weight}}}, {{"Out", {ur}}}, {{"axes", Attribute(std::vector<int32_t>{1})}, {"starts", Attribute(std::vector<int32_t>{0})}, {"ends", Attribute(std::vector<int32_t>{int32_t(2 * h)})}});
      add("slice", {{"Input", {weight}}}, {{"Out", {c}}}, {{"axes", Attribute(std::vector<int32_t>{1})}, {"starts", Attribute(std::vector<int32_t>{int32_t(2 * h)})}, {"ends", Attribute(std::vector<int32_t>{int32_t(3 * h)})}});
      reshape_to(ur, {-1}, urf);
      reshape_to(c, {-1}, cf);
      add("concat", {{"X", {urf, cf}}}, {{"Out", {both}}}, {{"axis", Attribute(int32_t(0))}});
      reshape_to(both, {h, g * h}, w3);
      weight = w3;
    }
    std::string bias;  // [1, g*h] (+ 3h peepholes): Wb + Rb in oar's order
    if (has_in(3)) {
      std::string b2 = tmp(), bs = tmp(), bcol = tmp();
      reshape_to(in(3), {2, g * h}, b2);
      add("reduce_sum", {{"X", {b2}}}, {{"Out", {bs}}}, {{"dim", Attribute(std::vector<int32_t>{0})}, {"keep_dim", Attribute(false)}, {"reduce_all", Attribute(false)}});
      reshape_to(bs, {g * h, 1}, bcol);
      std::string ob = reorder(bcol, 1), row = tmp();
      reshape_to(ob, {1, g * h}, row);
      bias = row;
    } else {
      bias = const_var("bias", cast_const(Tensor::from<double>(std::vector<double>(size_t(g * h), 0.0), Shape{1, g * h}), dt));
    }
    const bool peep = lstm && has_in(7);
    if (peep) {  // ONNX's P is [i, o, f]; oar's peepholes follow the bias as W_ic, W_fc, W_oc
      std::vector<int64_t> pi;
      for (int64_t blk : {0, 2, 1})
        for (int64_t j = 0; j < h; ++j) pi.push_back(blk * h + j);
      std::string p1 = tmp(), pg = tmp(), prow = tmp(), full = tmp();
      reshape_to(in(7), {3 * h}, p1);
      add("gather", {{"X", {p1}}, {"Index", {const_var("peephole_order", i64_tensor(pi, Shape{3 * h}))}}}, {{"Out", {pg}}});
      reshape_to(pg, {1, 3 * h}, prow);
      add("concat", {{"X", {bias, prow}}}, {{"Out", {full}}}, {{"axis", Attribute(int32_t(1))}});
      bias = full;
    }
    // [batch, steps, input] and each sequence's length
    const std::string bx = batch_major ? x : transposed(x, {1, 0, 2});
    const int64_t n = batch_major ? xs[0] : xs[1], t = batch_major ? xs[1] : xs[0];
    std::string lens;
    if (has_in(4)) {
      lens = cast_to(in(4), DType::i64);
    } else {
      if (n < 0 || t < 0) unsupported(fmt::format("no sequence_lens and X {} of unknown size", xs.str()));
      lens = const_var("lengths", i64_tensor(std::vector<int64_t>(size_t(n), t), Shape{n}));
    }
    std::string rows = tmp(), proj = tmp();
    add("sequence_unpad", {{"X", {bx}}, {"Length", {lens}}}, {{"Out", {rows}}});
    add("mul", {{"X", {rows}}, {"Y", {wp}}}, {{"Out", {proj}}},
        {{"x_num_col_dims", Attribute(int32_t(1))}, {"y_num_col_dims", Attribute(int32_t(1))}});
    std::vector<SlotArgs> ins = {{"Input", {proj}}, {"Weight", {weight}}, {"Bias", {bias}}};
    auto state = [&](int i, const char* slot) {  // [1, batch, H] -> [batch, H]
      if (!has_in(i)) return;
      std::string s2 = tmp();
      reshape_to(in(i), {-1, h}, s2);
      ins.push_back({slot, {s2}});
    };
    state(5, "H0");
    if (lstm) state(6, "C0");
    const std::string hidden = tmp(), cell = tmp();
    if (lstm)
      add("lstm", ins, {{"Hidden", {hidden}}, {"Cell", {cell}}, {"BatchGate", {tmp()}}, {"BatchCellPreAct", {tmp()}}},
          {{"use_peepholes", Attribute(peep)}, {"is_reverse", Attribute(dir == "reverse")}});
    else
      add("gru", ins, {{"Hidden", {hidden}}, {"BatchGate", {tmp()}}, {"BatchResetHiddenPrev", {tmp()}}, {"BatchHidden", {tmp()}}},
          {{"is_reverse", Attribute(dir == "reverse")}});
    if (has_out(0)) {  // Y: [steps, 1, batch, H] (layout 1: [batch, steps, 1, H])
      std::string padded = tmp();
      add("sequence_pad", {{"X", {hidden}}, {"PadValue", {const_var("pad", cast_const(Tensor::from<double>({0.0}, Shape{1}), dt))}}},
          {{"Out", {padded}}, {"Length", {tmp()}}},
          {{"padded_length", Attribute(int32_t(t))}});
      std::string y = batch_major ? padded : transposed(padded, {1, 0, 2});
      add("unsqueeze", {{"X", {y}}}, {{"Out", {out(0)}}}, {{"axes", Attribute(std::vector<int32_t>{batch_major ? 2 : 1})}});
    }
    auto last = [&](int i, const std::string& v) {  // Y_h / Y_c: [1, batch, H] (layout 1: [batch, 1, H])
      if (!has_out(i)) return;
      std::string l = tmp();
      add("sequence_pool", {{"X", {v}}}, {{"Out", {l}}, {"MaxIndex", {tmp()}}}, {{"pooltype", Attribute(std::string(dir == "reverse" ? "FIRST" : "LAST"))}});
      add("unsqueeze", {{"X", {l}}}, {{"Out", {out(i)}}}, {{"axes", Attribute(std::vector<int32_t>{batch_major ? 1 : 0})}});
    };
    last(1, hidden);
    if (lstm) last(2, cell);
    else only_outputs(2);
  }
  void h_split() {
    const Shape xs = in_shape(0);
    const int64_t axis = axis_in(ai("axis", 0), xs.rank());
    std::vector<int64_t> sections = opset_ >= 13 ? (has_in(1) ? as_i64(need_const(1, "split")) : std::vector<int64_t>{}) : ais("split");
    std::vector<std::string> outs;
    for (int i = 0; i < num_out(); ++i) outs.push_back(has_out(i) ? out(i) : tmp());
    std::map<std::string, Attribute> attrs = {{"axis", Attribute(int32_t(axis))}};
    if (sections.empty()) attrs["num"] = Attribute(int32_t(outs.size()));
    else attrs["sections"] = Attribute(i32(sections));
    add("split", {{"X", {in(0)}}}, {{"Out", outs}}, attrs);
  }
};

const std::map<std::string, Importer::Handler>& Importer::handlers() {
  using I = Importer;
  static const std::map<std::string, Handler> m = {
      {"Abs", &I::h_unary},          {"Add", &I::h_binary},           {"ArgMax", &I::h_arg},
      {"ArgMin", &I::h_arg},         {"AveragePool", &I::h_pool},     {"BatchNormalization", &I::h_batch_norm},
      {"Cast", &I::h_cast},          {"Clip", &I::h_clip},            {"Concat", &I::h_concat},
      {"Constant", &I::h_constant},  {"ConstantOfShape", &I::h_constant_of_shape},
      {"Conv", &I::h_conv},          {"ConvTranspose", &I::h_conv_transpose},          {"Div", &I::h_binary},           {"Dropout", &I::h_dropout},
      {"Elu", &I::h_elu},            {"Erf", &I::h_unary},            {"Exp", &I::h_unary},
      {"Expand", &I::h_expand},      {"Flatten", &I::h_flatten},      {"Gather", &I::h_gather},
      {"Gemm", &I::h_gemm},          {"Equal", &I::h_compare},        {"Less", &I::h_compare},
      {"Greater", &I::h_compare},    {"LessOrEqual", &I::h_compare},  {"GreaterOrEqual", &I::h_compare},
      {"And", &I::h_logical},        {"Or", &I::h_logical},           {"Xor", &I::h_logical},
      {"Not", &I::h_not},          {"GlobalAveragePool", &I::h_global_pool},
      {"GlobalMaxPool", &I::h_global_pool},
      {"HardSigmoid", &I::h_hard_sigmoid},
      {"HardSwish", &I::h_hard_swish},
      {"Identity", &I::h_identity},  {"LayerNormalization", &I::h_layer_norm},
      {"LeakyRelu", &I::h_leaky_relu},
      {"Log", &I::h_unary},          {"LogSoftmax", &I::h_softmax},   {"MatMul", &I::h_matmul},
      {"Max", &I::h_variadic},       {"MaxPool", &I::h_pool},         {"Mean", &I::h_variadic},
      {"Min", &I::h_variadic},       {"Mul", &I::h_binary},           {"Neg", &I::h_unary},
      {"Pow", &I::h_binary},         {"PRelu", &I::h_prelu},          {"Range", &I::h_range},
      {"Reciprocal", &I::h_unary},   {"ReduceL1", &I::h_reduce},      {"ReduceL2", &I::h_reduce},
      {"ReduceLogSum", &I::h_reduce},
      {"ReduceLogSumExp", &I::h_reduce},
      {"ReduceMax", &I::h_reduce},   {"ReduceMean", &I::h_reduce},    {"ReduceMin", &I::h_reduce},
      {"ReduceSum", &I::h_reduce},   {"ReduceSumSquare", &I::h_reduce},
      {"Relu", &I::h_unary},         {"Reshape", &I::h_reshape},      {"Selu", &I::h_selu},
      {"Shape", &I::h_shape},        {"Sigmoid", &I::h_unary},        {"Size", &I::h_size},
      {"Slice", &I::h_slice},        {"Softmax", &I::h_softmax},      {"Softplus", &I::h_unary},
      {"Floor", &I::h_unary},        {"Ceil", &I::h_unary},           {"Round", &I::h_unary},
      {"Sin", &I::h_unary},          {"Cos", &I::h_unary},            {"Tan", &I::h_unary},
      {"Asin", &I::h_unary},         {"Acos", &I::h_unary},           {"Atan", &I::h_unary},
      {"Sinh", &I::h_unary},         {"Cosh", &I::h_unary},           {"Asinh", &I::h_unary},
      {"Acosh", &I::h_unary},        {"Atanh", &I::h_unary},          {"Sign", &I::h_sign},
      {"Celu", &I::h_celu},          {"Where", &I::h_where},          {"TopK", &I::h_topk},
      {"DepthToSpace", &I::h_depth_space},
      {"SpaceToDepth", &I::h_depth_space},
      {"InstanceNormalization", &I::h_instance_norm},
      {"EyeLike", &I::h_eye_like},   {"IsNaN", &I::h_isnan},          {"IsInf", &I::h_isinf},
      {"Tile", &I::h_tile},          {"LSTM", &I::h_rnn},             {"GRU", &I::h_rnn},          {"CastLike", &I::h_cast_like},   {"Trilu", &I::h_trilu},
      {"Hardmax", &I::h_hardmax},    {"Mod", &I::h_mod},              {"GatherElements", &I::h_gather_elements},
      {"ThresholdedRelu", &I::h_thresholded_relu},
      {"CumSum", &I::h_cumsum},      {"OneHot", &I::h_onehot},        {"ReduceProd", &I::h_reduce},
      {"NegativeLogLikelihoodLoss", &I::h_nll},
      {"Softsign", &I::h_unary},     {"SoftmaxCrossEntropyLoss", &I::h_softmax_xent},     {"Split", &I::h_split},          {"Sqrt", &I::h_unary},
      {"Squeeze", &I::h_squeeze},    {"Sub", &I::h_binary},           {"Sum", &I::h_variadic},
      {"Tanh", &I::h_unary},         {"Transpose", &I::h_transpose},  {"Unsqueeze", &I::h_unsqueeze},
  };
  return m;
}

}  // namespace

Model import_model_bytes(const std::string& bytes, Place place, const ImportOptions& options, const std::string& what) {
  ::onnx::ModelProto m;
  if (!m.ParseFromString(bytes)) throw Error(fmt::format("{}: not a serialized ONNX model (onnx.ModelProto)", what));
  if (!m.has_graph()) throw Error(fmt::format("{}: the model has no graph", what));
  return Importer(m, what, options).run(place);
}

Model import_model(const std::filesystem::path& path, Place place, const ImportOptions& options) {
  return import_model_bytes(oar::detail::read_file(path), place, options, path.string());
}

std::vector<std::string> supported_import_ops() {
  std::vector<std::string> v;
  for (auto& [k, h] : Importer::handlers()) v.push_back(k);
  return v;
}

}  // namespace oar::onnx
