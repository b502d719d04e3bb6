// src/onnx/export.cpp: an oar inference program as an ONNX graph. Each oar op becomes one ONNX node or a short
// chain of them; oar's variables become ONNX values (renamed when an op writes a variable a second time, since
// ONNX values are assigned once); parameters become initializers, reshaped where Fluid's broadcast along
// `axis` differs from ONNX's right-aligned one. The result passes ONNX's checker and its strict shape inference
// before it is written.
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <limits>
#include <map>
#include <numbers>
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

class Exporter {
 public:
  Exporter(const Program& p, const Scope& scope, const ExportOptions& o) : b_(p.global_block()), scope_(scope), opt_(o) {}

  ::onnx::ModelProto run(const std::vector<std::string>& feeds, const std::vector<std::string>& fetches) {
    ::onnx::ModelProto m;
    m.set_ir_version(8);  // ONNX 1.12's IR version, which reads opsets up to 17
    m.set_producer_name(opt_.producer);
    m.set_producer_version(fmt::format("{}.{}.{}", OAR_VERSION_MAJOR, OAR_VERSION_MINOR, OAR_VERSION_PATCH));
    auto* imp = m.add_opset_import();
    imp->set_domain("");
    imp->set_version(opt_.opset);
    g_ = m.mutable_graph();
    g_->set_name("oar");
    for (const auto& f : feeds) {
      const Variable& v = var(f);
      if (v.lod_level() > 1)
        throw Error(fmt::format("export: feed '{}' has {} LoD levels; sequences of sequences cannot be exported", f, v.lod_level()), v.origin());
      if (v.lod_level() == 1) {  // padded [batch, max_len, row dims...] and its lengths [batch]
        Shape padded{-1, -1};
        for (int i = 1; i < v.shape().rank(); ++i) padded.push_back(v.shape()[i]);
        auto& in = *g_->add_input();
        value_info(in, f, v.dtype(), padded, true);
        in.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_param("max_len");
        lengths_ = f + "_lengths";
        used_.insert(lengths_);
        value_info(*g_->add_input(), lengths_, DType::i64, Shape{-1}, true);
        seq_.insert(f);
      }
      if (v.lod_level() == 0) value_info(*g_->add_input(), f, v.dtype(), v.shape(), true);
      define(f);
    }
    for (auto* op : b_.ops()) {
      try {
        emit(*op);
      } catch (Error& e) {
        if (!e.origin().known()) throw Error(e.message(), op->origin());
        throw;
      }
    }
    for (const auto& f : fetches) {
      const Variable& v = var(f);
      Shape s = v.shape();
      if (is_seq(f)) {  // padded: [batch, max_len, row dims...]
        s = Shape{-1, -1};
        for (int i = 1; i < v.shape().rank(); ++i) s.push_back(v.shape()[i]);
      }
      value_info(*g_->add_output(), value(f), v.dtype(), s, false);
    }
    return m;
  }

 private:
  const Block& b_;
  const Scope& scope_;
  const ExportOptions& opt_;
  ::onnx::GraphProto* g_ = nullptr;
  std::map<std::string, std::string> current_;  // oar variable -> the ONNX value holding it now
  std::set<std::string> used_;                  // every ONNX value name taken
  std::map<std::string, std::string> consts_;   // constant key -> initializer name
  // Sequences (LoD level 1) are padded in the graph: [batch, max_len, row dims...], with their lengths in the
  // graph input lengths_. seq_ holds the oar variables that are such padded sequences.
  std::set<std::string> seq_;
  std::string lengths_;
  bool is_seq(const std::string& n) const { return seq_.count(n) != 0; }

  const Variable& var(const std::string& n) const {
    if (auto* v = b_.find_var(n)) return *v;
    throw Error(fmt::format("export: no variable '{}' in the program", n));
  }
  const Shape& shape(const std::string& n) const { return var(n).shape(); }
  DType dtype(const std::string& n) const { return var(n).dtype(); }

  std::string fresh(const std::string& base) {
    std::string n = base;
    for (int k = 1; used_.count(n); ++k) n = fmt::format("{}_{}", base, k);
    used_.insert(n);
    return n;
  }
  /// The ONNX value an op's output variable `n` becomes (a new name when `n` was written before).
  std::string define(const std::string& n) {
    std::string v = fresh(n);
    current_[n] = v;
    return v;
  }
  /// The ONNX value holding oar variable `n`: an earlier op's output, a feed, or a parameter (made an
  /// initializer the first time it is read).
  std::string value(const std::string& n) {
    if (auto it = current_.find(n); it != current_.end()) return it->second;
    const Variable& v = var(n);
    const Value* val = scope_.find(n);
    if (!v.persistable() || !val || !val->is_tensor() || !val->tensor().initialized())
      throw Error(fmt::format("export: '{}' is read before any op writes it, and it is neither a feed nor a saved parameter", n), v.origin());
    std::string name = define(n);
    detail::to_proto(val->tensor(), name, *g_->add_initializer());
    return name;
  }
  /// A parameter's tensor (the scope's value of a persistable variable that no op wrote), or nullptr.
  const Tensor* param(const std::string& n) const {
    if (current_.count(n)) return nullptr;
    const Variable* v = b_.find_var(n);
    const Value* val = scope_.find(n);
    if (!v || !v->persistable() || !val || !val->is_tensor() || !val->tensor().initialized()) return nullptr;
    return &val->tensor();
  }
  /// A parameter written as an initializer under a new name with another shape (or other values).
  std::string initializer(const Tensor& t, const std::string& base) {
    std::string name = fresh(base);
    detail::to_proto(t, name, *g_->add_initializer());
    return name;
  }
  std::string scalar(double v, DType dt) {
    std::string key = fmt::format("s{}:{}", int(dt), v);
    if (auto it = consts_.find(key); it != consts_.end()) return it->second;
    Tensor t(Shape{}, dt);
    if (dt == DType::f64) *t.data<double>() = v;
    else if (dt == DType::f32) *t.data<float>() = float(v);
    else if (dt == DType::i64) *t.data<int64_t>() = int64_t(v);
    else if (dt == DType::i32) *t.data<int32_t>() = int32_t(v);
    else throw Error(fmt::format("export: no scalar constant of dtype {}", int(dt)));
    return consts_[key] = initializer(t, "const");
  }
  std::string ints(const std::vector<int64_t>& v) {
    std::string key = fmt::format("i:{}", fmt::join(v, ","));
    if (auto it = consts_.find(key); it != consts_.end()) return it->second;
    return consts_[key] = initializer(Tensor::from<int64_t>(v, Shape{int64_t(v.size())}), "const");
  }

  NodeProto& node(const std::string& type, const std::vector<std::string>& in, const std::vector<std::string>& out, const Operator& src) {
    NodeProto& n = *g_->add_node();
    n.set_op_type(type);
    n.set_name(fresh(fmt::format("{}_{}", src.type(), g_->node_size() - 1)));
    for (auto& i : in) n.add_input(i);
    for (auto& o : out) n.add_output(o);
    if (src.origin().known()) n.set_doc_string(src.origin().str());
    return n;
  }
  /// One output node: `type(in...)` written to a new value named after `base`.
  std::string apply(const std::string& type, const std::vector<std::string>& in, const Operator& src, const std::string& base = "t") {
    std::string out = fresh(base);
    node(type, in, {out}, src);
    return out;
  }
  /// Binds oar variable `out_var` to the value `v` computed for it. A temporary value is renamed to the
  /// variable's own name when that is free, so that the graph reads like the program.
  void bind(const std::string& out_var, const std::string& v) {
    NodeProto* last = g_->mutable_node(g_->node_size() - 1);
    if (last->output_size() == 1 && last->output(0) == v) {
      std::string name = define(out_var);
      last->set_output(0, name);
      used_.erase(v);
      return;
    }
    node_identity(out_var, v);
  }
  void node_identity(const std::string& out_var, const std::string& v) {
    std::string name = define(out_var);
    NodeProto& n = *g_->add_node();
    n.set_op_type("Identity");
    n.set_name(fresh("identity"));
    n.add_input(v);
    n.add_output(name);
  }

  static void attr(NodeProto& n, const std::string& k, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(k), a->set_type(::onnx::AttributeProto::INT), a->set_i(v);
  }
  static void attr(NodeProto& n, const std::string& k, float v) {
    auto* a = n.add_attribute();
    a->set_name(k), a->set_type(::onnx::AttributeProto::FLOAT), a->set_f(v);
  }
  static void attr(NodeProto& n, const std::string& k, const std::vector<int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(k), a->set_type(::onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  static void attr(NodeProto& n, const std::string& k, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(k), a->set_type(::onnx::AttributeProto::STRING), a->set_s(v);
  }

  void value_info(::onnx::ValueInfoProto& vi, const std::string& name, DType dt, const Shape& s, bool symbolic) {
    vi.set_name(name);
    auto* tt = vi.mutable_type()->mutable_tensor_type();
    tt->set_elem_type(detail::onnx_type(dt, name));
    auto* sh = tt->mutable_shape();
    for (int i = 0; i < s.rank(); ++i) {
      auto* d = sh->add_dim();
      if (s[i] >= 0) d->set_dim_value(s[i]);
      else if (symbolic) d->set_dim_param(i == 0 ? "batch" : fmt::format("{}_dim{}", name, i));
    }
  }

  [[noreturn]] static void fail(const Operator& op, const std::string& why) {
    throw Error(fmt::format("export: op '{}' {}", op.type(), why), op.origin());
  }
  static std::vector<int64_t> i64(const std::vector<int32_t>& v) { return {v.begin(), v.end()}; }
  std::string in(const Operator& op, std::string_view slot, size_t i = 0) {
    const auto& a = op.input(slot);
    if (a.size() <= i) fail(op, fmt::format("has no input {} in slot {}", i, slot));
    return value(a[i]);
  }
  static const std::string& out_var(const Operator& op, std::string_view slot) {
    const auto& a = op.output(slot);
    if (a.empty()) fail(op, fmt::format("has no output in slot {}", slot));
    return a[0];
  }

  // ---- element-wise

  /// The unary function `name` (an oar unary op type or fused token) with its two parameters (in the order
  /// of ops/unary_list.hpp) applied to `x`.
  std::string unary(const std::string& name, float p0, float p1, const std::string& x, DType dt, const Operator& src) {
    static const std::map<std::string, std::string> direct = {{"relu", "Relu"}, {"sigmoid", "Sigmoid"}, {"tanh", "Tanh"}, {"exp", "Exp"},
                                                              {"log", "Log"}, {"sqrt", "Sqrt"}, {"abs", "Abs"}, {"reciprocal", "Reciprocal"},
                                                              {"softsign", "Softsign"}, {"neg", "Neg"}, {"sign", "Sign"}, {"erf", "Erf"},
                                                              {"floor", "Floor"}, {"ceil", "Ceil"}, {"round", "Round"}, {"sin", "Sin"}, {"cos", "Cos"},
                                                              {"tan", "Tan"}, {"asin", "Asin"}, {"acos", "Acos"}, {"atan", "Atan"}, {"sinh", "Sinh"},
                                                              {"cosh", "Cosh"}, {"asinh", "Asinh"}, {"acosh", "Acosh"}, {"atanh", "Atanh"}};
    if (auto it = direct.find(name); it != direct.end()) return apply(it->second, {x}, src);
    if (name == "square") return apply("Mul", {x, x}, src);
    if (name == "softplus") {  // log(1 + e^(beta x)) / beta; the threshold only guards e^x's overflow
      if (p0 == 1) return apply("Softplus", {x}, src);
      return apply("Div", {apply("Softplus", {apply("Mul", {x, scalar(p0, dt)}, src)}, src), scalar(p0, dt)}, src);
    }
    if (name == "gelu") {
      if (p0 == 0) {  // x/2 (1 + erf(x / sqrt 2))
        auto e = apply("Erf", {apply("Div", {x, scalar(std::numbers::sqrt2, dt)}, src)}, src);
        return apply("Mul", {apply("Mul", {x, scalar(0.5, dt)}, src), apply("Add", {e, scalar(1, dt)}, src)}, src);
      }
      // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      auto x3 = apply("Mul", {apply("Mul", {x, x}, src), x}, src);
      auto inner = apply("Add", {x, apply("Mul", {x3, scalar(0.044715, dt)}, src)}, src);
      auto t = apply("Tanh", {apply("Mul", {inner, scalar(std::sqrt(2 / std::numbers::pi), dt)}, src)}, src);
      return apply("Mul", {apply("Mul", {x, scalar(0.5, dt)}, src), apply("Add", {t, scalar(1, dt)}, src)}, src);
    }
    if (name == "leaky_relu") {
      std::string o = fresh("t");
      attr(node("LeakyRelu", {x}, {o}, src), "alpha", p0);
      return o;
    }
    if (name == "elu") {
      std::string o = fresh("t");
      attr(node("Elu", {x}, {o}, src), "alpha", p0);
      return o;
    }
    if (name == "relu6") return apply("Clip", {x, scalar(0, dt), scalar(p0, dt)}, src);
    if (name == "clip") return apply("Clip", {x, scalar(p0, dt), scalar(p1, dt)}, src);
    if (name == "hard_sigmoid") {
      std::string o = fresh("t");
      auto& n = node("HardSigmoid", {x}, {o}, src);
      attr(n, "alpha", p0), attr(n, "beta", p1);
      return o;
    }
    if (name == "swish") {  // x sigmoid(beta x)
      auto bx = p0 == 1 ? x : apply("Mul", {x, scalar(p0, dt)}, src);
      return apply("Mul", {x, apply("Sigmoid", {bx}, src)}, src);
    }
    if (name == "pow") return apply("Pow", {x, scalar(p0, dt)}, src);
    fail(src, fmt::format("has no ONNX form for the element-wise function '{}'", name));
  }

  /// Y of a Fluid binary op, reshaped so that ONNX's right-aligned broadcast puts it where Fluid's `axis`
  /// does: Y's dims (trailing 1s dropped) followed by 1s up to X's last dim.
  std::string fluid_broadcast_y(const Operator& op, const std::string& xn, const std::string& yn, int axis) {
    const Shape& xs = shape(xn);
    const Shape& ys = shape(yn);
    if (xs == ys || axis == -1 || axis == xs.rank() - ys.rank()) return value(yn);
    int ry = ys.rank();
    while (ry > 0 && ys[ry - 1] == 1) --ry;
    if (ry == 0) return value(yn);  // one value: broadcasts anywhere
    const int target = xs.rank() - axis;  // Y's rank once padded with trailing 1s
    if (target < ry) fail(op, fmt::format("broadcasts Y {} at axis {} over X {}, which ONNX cannot express", ys.str(), axis, xs.str()));
    Shape want;
    for (int i = 0; i < ry; ++i) want.push_back(ys[i]);
    while (want.rank() < target) want.push_back(1);
    if (const Tensor* t = param(yn)) return initializer(t->view(want), yn);  // a bias: reshaped once, here
    const std::string y = value(yn);
    if (want.known()) return apply("Reshape", {y, ints(std::vector<int64_t>(want.begin(), want.end()))}, op, yn);
    std::vector<int64_t> axes;
    for (int i = ys.rank(); i < target; ++i) axes.push_back(i);
    if (ys.rank() > target) fail(op, fmt::format("broadcasts Y {} of unknown dims at axis {} over X {}", ys.str(), axis, xs.str()));
    return apply("Unsqueeze", {y, ints(axes)}, op, yn);
  }

  void fused(const Operator& op) {
    ops::fused::Program prog;
    const auto& xs = op.input("X");
    if (std::string why = ops::fused::parse(op.attr<std::string>("expression"), xs.size(), prog); !why.empty()) fail(op, why);
    const DType dt = dtype(out_var(op, "Out"));
    std::vector<std::string> vals(prog.nodes.size());
    static constexpr const char* kBinary[] = {"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow"};
    for (size_t i = 0; i < prog.nodes.size(); ++i) {
      const auto& n = prog.nodes[i];
      switch (n.kind) {
        case ops::fused::Kind::input: vals[i] = value(xs[size_t(n.input)]); break;
        case ops::fused::Kind::constant: vals[i] = scalar(n.value, dt); break;
        case ops::fused::Kind::unary:
          vals[i] = unary(std::string(ops::fused::unary_tokens[n.code].name), n.p0, n.p1, vals[size_t(n.a)], dt, op);
          break;
        case ops::fused::Kind::binary: vals[i] = apply(kBinary[n.code], {vals[size_t(n.a)], vals[size_t(n.b)]}, op); break;
      }
    }
    std::string result = vals.back();
    if (prog.nodes.back().kind != ops::fused::Kind::binary && prog.nodes.back().kind != ops::fused::Kind::unary)
      result = apply("Identity", {result}, op);
    bind(out_var(op, "Out"), result);
  }

  // ---- the ops

  void emit(const Operator& op) {
    const std::string& t = op.type();
    if (t == "feed" || t == "fetch") return;
    if (t == "lstm" || t == "gru") return rnn(op);
    if (t == "sequence_pool") return sequence_pool(op);
    bool reads_seq = false;
    for (auto& n : op.input_names()) {
      if (seq_bad_.count(n)) fail(op, fmt::format("reads the LSTM's per-step cell '{}', which is not exported", n));
      reads_seq = reads_seq || is_seq(n);
    }
    if (reads_seq) return row_wise(op);
    emit_dense(op);
  }

  void emit_dense(const Operator& op) {
    const std::string& t = op.type();
    static const std::map<std::string, std::string> binary = {{"elementwise_add", "Add"}, {"elementwise_sub", "Sub"}, {"elementwise_mul", "Mul"},
                                                              {"elementwise_div", "Div"}, {"elementwise_max", "Max"}, {"elementwise_min", "Min"},
                                                              {"elementwise_pow", "Pow"}};
    if (auto it = binary.find(t); it != binary.end()) {
      const auto& xn = op.input("X").at(0);
      auto y = fluid_broadcast_y(op, xn, op.input("Y").at(0), op.attr_or<int32_t>("axis", -1));
      bind(out_var(op, "Out"), apply(it->second, {value(xn), y}, op));
      return;
    }
    static const std::set<std::string> unary_ops = {"relu", "sigmoid", "tanh", "exp", "log", "sqrt", "abs", "square", "reciprocal", "softplus",
                                                    "softsign", "gelu", "erf", "floor", "ceil", "round", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                                                    "asinh", "acosh", "atanh", "leaky_relu", "elu", "relu6", "hard_sigmoid", "swish", "pow", "clip", "sign"};
    if (unary_ops.count(t)) {
      // The parameters in the order of ops/unary_list.hpp (through the fused grammar's token table).
      float p[2] = {0, 0};
      for (const auto& tok : ops::fused::unary_tokens)
        if (tok.name == t)
          for (int k = 0; k < 2; ++k) {
            p[k] = tok.p[k].dflt;
            if (!tok.p[k].name.empty() && op.has_attr(tok.p[k].name))
              p[k] = tok.p[k].is_bool ? float(op.attr<bool>(tok.p[k].name)) : op.attr<float>(tok.p[k].name);
          }
      static const std::map<std::string, std::pair<std::string, std::string>> names = {
          {"leaky_relu", {"alpha", ""}}, {"elu", {"alpha", ""}}, {"relu6", {"threshold", ""}}, {"hard_sigmoid", {"slope", "offset"}},
          {"swish", {"beta", ""}}, {"pow", {"factor", ""}}, {"clip", {"min", "max"}}};
      if (auto it = names.find(t); it != names.end()) {
        if (op.has_attr(it->second.first)) p[0] = op.attr<float>(it->second.first);
        if (!it->second.second.empty() && op.has_attr(it->second.second)) p[1] = op.attr<float>(it->second.second);
      }
      const auto& x = op.input("X").at(0);
      bind(out_var(op, "Out"), unary(t, p[0], p[1], value(x), dtype(x), op));
      return;
    }
    if (t == "fused_elementwise") return fused(op);
    if (t == "mul") return mul(op);
    if (t == "matmul") return matmul(op);
    if (t == "conv2d" || t == "conv2d_fusion") return conv(op);
    if (t == "pool2d") return pool(op);
    if (t == "batch_norm") {
      if (op.attr_or<std::string>("data_layout", "NCHW") != "NCHW") fail(op, "has data_layout other than NCHW");
      std::string o = fresh("t");
      auto& n = node("BatchNormalization", {in(op, "X"), in(op, "Scale"), in(op, "Bias"), in(op, "Mean"), in(op, "Variance")}, {o}, op);
      attr(n, "epsilon", op.attr<float>("epsilon"));
      attr(n, "momentum", op.attr<float>("momentum"));
      return bind(out_var(op, "Y"), o);
    }
    if (t == "layer_norm") return layer_norm(op);
    if (t == "softmax" || t == "log_softmax") {
      std::string o = fresh("t");
      attr(node(t == "softmax" ? "Softmax" : "LogSoftmax", {in(op, "X")}, {o}, op), "axis", int64_t(op.attr_or<int32_t>("axis", -1)));
      return bind(out_var(op, "Out"), o);
    }
    if (t == "scale") {
      const auto& xn = op.input("X").at(0);
      const DType dt = dtype(xn);
      std::string x = value(xn);
      const double s = op.attr<float>("scale"), b = op.attr<float>("bias");
      const bool after = op.attr_or<bool>("bias_after_scale", true);
      if (!after && b != 0) x = apply("Add", {x, scalar(b, dt)}, op);
      if (s != 1) x = apply("Mul", {x, scalar(s, dt)}, op);
      if (after && b != 0) x = apply("Add", {x, scalar(b, dt)}, op);
      if (s == 1 && b == 0) x = apply("Identity", {x}, op);
      return bind(out_var(op, "Out"), x);
    }
    if (t == "dropout") {  // inference: downgrade_in_infer scales by 1 - p, upscale_in_train passes X through
      const auto& xn = op.input("X").at(0);
      const float p = op.attr<float>("dropout_prob");
      std::string x = value(xn);
      if (op.attr_or<std::string>("dropout_implementation", "downgrade_in_infer") == "downgrade_in_infer" && p != 0)
        x = apply("Mul", {x, scalar(1.0 - p, dtype(xn))}, op);
      else
        x = apply("Identity", {x}, op);
      return bind(out_var(op, "Out"), x);
    }
    if (t == "reshape") {
      std::vector<int64_t> s;
      for (auto d : op.attr<std::vector<int32_t>>("shape")) s.push_back(d);
      return bind(out_var(op, "Out"), apply("Reshape", {in(op, "X"), ints(s)}, op));
    }
    if (t == "transpose") {
      std::string o = fresh("t");
      attr(node("Transpose", {in(op, "X")}, {o}, op), "perm", i64(op.attr<std::vector<int32_t>>("axis")));
      return bind(out_var(op, "Out"), o);
    }
    if (t == "flatten") {
      std::string o = fresh("t");
      attr(node("Flatten", {in(op, "X")}, {o}, op), "axis", int64_t(op.attr<int32_t>("axis")));
      return bind(out_var(op, "Out"), o);
    }
    if (t == "concat") {
      std::vector<std::string> xs;
      for (auto& x : op.input("X")) xs.push_back(value(x));
      std::string o = fresh("t");
      attr(node("Concat", xs, {o}, op), "axis", int64_t(op.attr<int32_t>("axis")));
      return bind(out_var(op, "Out"), o);
    }
    if (t == "sum") {
      std::vector<std::string> xs;
      for (auto& x : op.input("X")) xs.push_back(value(x));
      return bind(out_var(op, "Out"), apply(xs.size() == 1 ? "Identity" : "Sum", xs, op));
    }
    if (t == "mean") {  // Fluid's mean is [1]
      std::string o = fresh("t");
      attr(node("ReduceMean", {in(op, "X")}, {o}, op), "keepdims", int64_t(0));
      return bind(out_var(op, "Out"), apply("Reshape", {o, ints({1})}, op));
    }
    if (t == "assign") return bind(out_var(op, "Out"), apply("Identity", {in(op, "X")}, op));
    if (t == "lookup_table") return lookup(op);
    if (t == "cast") {
      std::string o = fresh("t");
      attr(node("Cast", {in(op, "X")}, {o}, op), "to", int64_t(detail::onnx_type(DType(op.attr<int32_t>("out_dtype")), "cast")));
      return bind(out_var(op, "Out"), o);
    }
    if (t == "squeeze" || t == "unsqueeze") {
      auto axes = i64(op.attr<std::vector<int32_t>>("axes"));
      std::vector<std::string> args{in(op, "X")};
      if (!axes.empty()) args.push_back(ints(axes));
      return bind(out_var(op, "Out"), apply(t == "squeeze" ? "Squeeze" : "Unsqueeze", args, op));
    }
    if (t == "slice") {
      auto v = [&](const char* k) { return ints(i64(op.attr<std::vector<int32_t>>(k))); };
      return bind(out_var(op, "Out"), apply("Slice", {in(op, "Input"), v("starts"), v("ends"), v("axes")}, op));
    }
    if (t == "gather") return bind(out_var(op, "Out"), apply("Gather", {in(op, "X"), in(op, "Index")}, op));
    if (t == "reduce_sum" || t == "reduce_mean" || t == "reduce_max" || t == "reduce_min") return reduce(op);
    if (t == "arg_max" || t == "arg_min") {
      std::string o = fresh("t");
      auto& n = node(t == "arg_max" ? "ArgMax" : "ArgMin", {in(op, "X")}, {o}, op);
      attr(n, "axis", op.attr<int64_t>("axis")), attr(n, "keepdims", int64_t(op.attr<bool>("keepdims")));
      return bind(out_var(op, "Out"), o);
    }
    if (t == "stack") {
      const int64_t axis = op.attr<int32_t>("axis");
      std::vector<std::string> xs;
      for (auto& x : op.input("X")) xs.push_back(apply("Unsqueeze", {value(x), ints({axis})}, op));
      std::string o = fresh("t");
      attr(node("Concat", xs, {o}, op), "axis", axis);
      return bind(out_var(op, "Y"), o);
    }
    if (t == "softmax_with_cross_entropy") return softmax_xent(op);
    static const std::map<std::string, std::string> compare = {{"less_than", "Less"}, {"less_equal", "LessOrEqual"}, {"greater_than", "Greater"},
                                                               {"greater_equal", "GreaterOrEqual"}, {"equal", "Equal"}, {"not_equal", "Equal"}};
    if (auto it = compare.find(t); it != compare.end()) {
      const auto& xn = op.input("X").at(0);
      auto y = fluid_broadcast_y(op, xn, op.input("Y").at(0), op.attr_or<int32_t>("axis", -1));
      std::string o = apply(it->second, {value(xn), y}, op);
      if (t == "not_equal") o = apply("Not", {o}, op);
      return bind(out_var(op, "Out"), o);
    }
    static const std::map<std::string, std::string> logical = {{"logical_and", "And"}, {"logical_or", "Or"}, {"logical_xor", "Xor"}};
    if (auto it = logical.find(t); it != logical.end()) return bind(out_var(op, "Out"), apply(it->second, {in(op, "X"), in(op, "Y")}, op));
    if (t == "logical_not") return bind(out_var(op, "Out"), apply("Not", {in(op, "X")}, op));
    if (t == "sigmoid_cross_entropy_with_logits") {  // max(x, 0) - x l + log(1 + e^-|x|); 0 where l is ignore_index
      const auto& xn = op.input("X").at(0);
      std::string x = value(xn), l = in(op, "Label");
      std::string o = apply("Add", {apply("Sub", {apply("Relu", {x}, op), apply("Mul", {x, l}, op)}, op),
                                    apply("Softplus", {apply("Neg", {apply("Abs", {x}, op)}, op)}, op)}, op);
      const int32_t ii = op.attr_or<int32_t>("ignore_index", -100);
      if (ii != -100) o = apply("Where", {apply("Equal", {l, scalar(ii, dtype(xn))}, op), scalar(0, dtype(xn)), o}, op);
      return bind(out_var(op, "Out"), o);
    }
    if (t == "conv2d_transpose") {
      if (op.attr_or<std::string>("data_format", "NCHW") != "NCHW") fail(op, "has a data_format other than NCHW");
      const Shape& fs = shape(op.input("Filter").at(0));
      auto p = op.attr<std::vector<int32_t>>("paddings");
      std::string o = fresh("t");
      auto& n = node("ConvTranspose", {in(op, "Input"), in(op, "Filter")}, {o}, op);
      attr(n, "kernel_shape", std::vector<int64_t>{fs[2], fs[3]});
      attr(n, "pads", std::vector<int64_t>{p[0], p[1], p[0], p[1]});
      attr(n, "strides", i64(op.attr<std::vector<int32_t>>("strides")));
      attr(n, "dilations", i64(op.attr<std::vector<int32_t>>("dilations")));
      attr(n, "group", int64_t(op.attr<int32_t>("groups")));
      const auto os = op.attr<std::vector<int32_t>>("output_size");
      if (!os.empty()) attr(n, "output_shape", i64(os));
      return bind(out_var(op, "Output"), o);
    }
    if (t == "one_hot") {  // X [N, 1] of class indices -> [N, depth] of 0 and 1
      const DType dt = DType(op.attr_or<int32_t>("dtype", int32_t(DType::f32)));
      std::string ids = apply("Squeeze", {in(op, "X"), ints({-1})}, op);
      Tensor vals(Shape{2}, dt);
      if (dt == DType::f64) vals.data<double>()[0] = 0, vals.data<double>()[1] = 1;
      else if (dt == DType::f32) vals.data<float>()[0] = 0, vals.data<float>()[1] = 1;
      else fail(op, fmt::format("has dtype {} (exported for f32 and f64)", name(dt)));
      std::string o = fresh("t");
      attr(node("OneHot", {ids, ints({op.attr<int32_t>("depth")}), initializer(vals, "one_hot_values")}, {o}, op), "axis", int64_t(-1));
      return bind(out_var(op, "Out"), o);
    }
    if (t == "fill_constant") {
      std::vector<int64_t> dims;
      for (auto v : op.attr<std::vector<int64_t>>("shape")) dims.push_back(v);
      const DType dt = DType(op.attr_or<int32_t>("dtype", int32_t(DType::f32)));
      Tensor c(Shape(dims), dt);
      const double v = op.attr<float>("value");
      for (int64_t i = 0; i < c.numel(); ++i)
        visit_dtype(dt, [&](auto tag) {
          using T = typename decltype(tag)::type;
          if constexpr (std::is_arithmetic_v<T>) c.data<T>()[i] = static_cast<T>(v);
          else fail(op, fmt::format("has dtype {}", name(dt)));
        });
      const std::string& o = out_var(op, "Out");
      return bind(o, apply("Identity", {initializer(c, o)}, op));
    }
    fail(op, "has no ONNX equivalent in this exporter");
  }

  /// softmax_with_cross_entropy (hard labels [N, 1]) as SoftmaxCrossEntropyLoss without reduction, its
  /// [N] losses made Fluid's [N, 1]; the Softmax output, when read, as Softmax.
  void softmax_xent(const Operator& op) {
    if (op.attr_or<bool>("soft_label", false)) fail(op, "has soft labels (ONNX's SoftmaxCrossEntropyLoss takes class indices)");
    const auto& ln = op.input("Logits").at(0);
    const auto& yn = op.input("Label").at(0);
    if (shape(ln).rank() != 2) fail(op, fmt::format("has Logits {} (exported for [N, C])", shape(ln).str()));
    std::string logits = value(ln), label = value(yn);
    if (shape(yn).rank() == 2) label = apply("Squeeze", {label, ints({1})}, op);
    std::string loss = fresh("t");
    auto& n = node("SoftmaxCrossEntropyLoss", {logits, label}, {loss}, op);
    attr(n, "reduction", std::string("none"));
    const int32_t ignore = op.attr_or<int32_t>("ignore_index", -100);
    if (ignore >= 0) attr(n, "ignore_index", int64_t(ignore));
    bind(out_var(op, "Loss"), apply("Unsqueeze", {loss, ints({1})}, op));
    if (op.has_output("Softmax")) {
      std::string sm = fresh("t");
      attr(node("Softmax", {logits}, {sm}, op), "axis", int64_t(-1));
      bind(out_var(op, "Softmax"), sm);
    }
  }

  /// An op over the rows of a padded sequence: those that act on each row alone run unchanged on [batch,
  /// max_len, ...] (their outputs are padded sequences too); others are refused.
  void row_wise(const Operator& op) {
    const std::string& t = op.type();
    static const std::set<std::string> rows = {"lookup_table", "mul", "elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
                                               "fused_elementwise", "scale", "dropout", "softmax", "log_softmax", "relu", "sigmoid", "tanh",
                                               "exp", "log", "sqrt", "abs", "square", "softplus", "softsign", "gelu", "leaky_relu", "elu",
                                               "relu6", "hard_sigmoid", "swish", "pow", "clip"};
    if (!rows.count(t)) fail(op, "reads a sequence, and only row-wise ops, lstm, gru and sequence_pool are exported over sequences");
    for (auto& n : op.input_names()) {  // a dense operand must broadcast over every row alike: a parameter
      if (is_seq(n) || param(n)) continue;
      fail(op, fmt::format("mixes the sequence with '{}', which is neither a sequence nor a parameter", n));
    }
    if (t == "mul" && op.attr<int32_t>("x_num_col_dims") != 1) fail(op, "flattens a sequence's rows (x_num_col_dims != 1)");
    if ((t == "softmax" || t == "log_softmax") && op.attr_or<int32_t>("axis", -1) != -1 && op.attr_or<int32_t>("axis", -1) != 1)
      fail(op, "normalizes across a sequence's rows");
    for (auto& n : op.output_names()) seq_.insert(n);  // before emitting: bind() keeps the name
    emit_dense(op);
  }

  /// 1 where a step lies inside its sequence: [batch, max_len] of `dt` (Range over max_len against lengths).
  std::string step_mask(const std::string& x, DType dt, const Operator& op) {
    auto shp = apply("Shape", {x}, op);
    auto t = apply("Gather", {shp, ints({1})}, op);  // [1]: max_len
    auto tl = apply("Squeeze", {t, ints({0})}, op);
    auto range = apply("Range", {scalar(0, DType::i64), tl, scalar(1, DType::i64)}, op);
    auto less = apply("Less", {apply("Unsqueeze", {range, ints({0})}, op), apply("Unsqueeze", {lengths_, ints({1})}, op)}, op);
    std::string o = fresh("t");
    attr(node("Cast", {less}, {o}, op), "to", int64_t(detail::onnx_type(dt, "mask")));
    return o;
  }

  /// lstm / gru over a padded [batch, max_len, gates] input as ONNX's LSTM / GRU with sequence_lens. oar's
  /// input projection is already applied, so the node's W is a 0/1 matrix routing oar's gate columns into
  /// ONNX's gate order (LSTM: oar c, i, f, o -> ONNX i, o, f, c; GRU: oar u, r, c -> ONNX z, r, h, with z = 1 -
  /// u made by negating u's weights and bias: sigmoid(-a) = 1 - sigmoid(a)).
  void rnn(const Operator& op) {
    const bool lstm = op.type() == "lstm";
    const auto& xn = op.input("Input").at(0);
    if (!is_seq(xn)) fail(op, "runs over an input that is not an exported sequence");
    if (op.has_input("H0") || op.has_input("C0")) fail(op, "has an initial state (H0 / C0), which is not exported yet");
    const Tensor* w = param(op.input("Weight").at(0));
    if (!w) fail(op, "has a Weight that is not a parameter");
    const Tensor* b = op.has_input("Bias") ? param(op.input("Bias").at(0)) : nullptr;
    if (op.has_input("Bias") && !b) fail(op, "has a Bias that is not a parameter");
    const DType dt = w->dtype();
    const int64_t h = w->dim(0), g = lstm ? 4 : 3;
    Tensor wc = w->to(cpu()), bc = b ? b->to(cpu()) : Tensor();
    auto wv = [&](int64_t r, int64_t c) { return wc.get(r * g * h + c); };
    auto bv = [&](int64_t c) { return b ? bc.get(c) : 0.0; };
    // ONNX gate k <- oar gate src[k], with sign sgn[k]
    std::vector<int64_t> src = lstm ? std::vector<int64_t>{1, 3, 2, 0} : std::vector<int64_t>{0, 1, 2};
    std::vector<double> sgn = lstm ? std::vector<double>{1, 1, 1, 1} : std::vector<double>{-1, 1, 1};
    std::vector<double> W(size_t(g * h * g * h), 0.0), R(size_t(g * h * h), 0.0), B(size_t(2 * g * h), 0.0);
    for (int64_t k = 0; k < g; ++k)
      for (int64_t j = 0; j < h; ++j) {
        const int64_t row = k * h + j, col = src[size_t(k)] * h + j;
        W[size_t(row * g * h + col)] = sgn[size_t(k)];
        B[size_t(row)] = sgn[size_t(k)] * bv(col);
        for (int64_t i = 0; i < h; ++i) {
          double r;
          if (lstm) r = wv(i, col);
          else if (k < 2) r = wc.get(i * 2 * h + col);  // GRU: W_ur [D, 2D] first, then W_c [D, D]
          else r = wc.get(2 * h * h + i * h + j);
          R[size_t(row * h + i)] = sgn[size_t(k)] * r;
        }
      }
    auto tensor = [&](const std::vector<double>& v, Shape s) {
      Tensor t(s, dt);
      for (size_t i = 0; i < v.size(); ++i) dt == DType::f64 ? void(t.data<double>()[i] = v[i]) : void(t.data<float>()[i] = float(v[i]));
      return t;
    };
    const std::string base = op.input("Weight").at(0);
    std::string steps = fresh("t"), lens = fresh("t");  // [max_len, batch, G]; sequence_lens is int32
    attr(node("Transpose", {value(xn)}, {steps}, op), "perm", std::vector<int64_t>{1, 0, 2});
    attr(node("Cast", {lengths_}, {lens}, op), "to", int64_t(::onnx::TensorProto::INT32));
    std::vector<std::string> in = {steps, initializer(tensor(W, {1, g * h, g * h}), base + "_W"), initializer(tensor(R, {1, g * h, h}), base + "_R"),
                                   initializer(tensor(B, {1, 2 * g * h}), base + "_B"), lens};
    if (lstm && op.attr_or<bool>("use_peepholes", true)) {
      if (!b || bc.numel() < 7 * h) fail(op, "uses peepholes without their weights in Bias");
      std::vector<double> P(size_t(3 * h));
      for (int64_t j = 0; j < h; ++j) P[size_t(j)] = bv(4 * h + j), P[size_t(h + j)] = bv(6 * h + j), P[size_t(2 * h + j)] = bv(5 * h + j);
      in.push_back("");  // initial_h
      in.push_back("");  // initial_c
      in.push_back(initializer(tensor(P, {1, 3 * h}), base + "_P"));
    }
    static const std::map<std::string, std::string> acts = {{"sigmoid", "Sigmoid"}, {"tanh", "Tanh"}, {"relu", "Relu"}, {"identity", "Identity"}};
    auto act = [&](const char* k, const char* d) {
      auto it = acts.find(op.attr_or<std::string>(k, d));
      if (it == acts.end()) fail(op, fmt::format("has {} '{}', which ONNX's recurrent ops lack", k, op.attr_or<std::string>(k, d)));
      return it->second;
    };
    std::string y = fresh("t");
    auto& n = node(lstm ? "LSTM" : "GRU", in, {y}, op);
    attr(n, "hidden_size", h);
    if (op.attr_or<bool>("is_reverse", false)) attr(n, "direction", std::string("reverse"));
    auto* a = n.add_attribute();
    a->set_name("activations"), a->set_type(::onnx::AttributeProto::STRINGS);
    if (lstm) {
      for (auto s2 : {act("gate_activation", "sigmoid"), act("cell_activation", "tanh"), act("candidate_activation", "tanh")}) a->add_strings(s2);
    } else {
      for (auto s2 : {act("gate_activation", "sigmoid"), act("activation", "tanh")}) a->add_strings(s2);
    }
    // Y [max_len, 1, batch, H] -> [batch, max_len, H]
    std::string yo = fresh("t");
    attr(node("Transpose", {apply("Squeeze", {y, ints({1})}, op)}, {yo}, op), "perm", std::vector<int64_t>{1, 0, 2});
    const std::string& hidden = out_var(op, "Hidden");
    seq_.insert(hidden);
    bind(hidden, yo);
    if (lstm)
      for (auto& c : op.output("Cell"))
        if (c != hidden) seq_bad_.insert(c);  // the per-step cell is not exported: reading it is refused
  }
  std::set<std::string> seq_bad_;

  /// sequence_pool over a padded sequence, the padding masked out by the lengths.
  void sequence_pool(const Operator& op) {
    const auto& xn = op.input("X").at(0);
    if (!is_seq(xn)) fail(op, "pools an input that is not an exported sequence");
    const std::string type = op.attr<std::string>("pooltype");
    const DType dt = dtype(xn);
    std::string x = value(xn);
    const int rank = shape(xn).rank() + 1;  // padded: one more dim than oar's rows
    std::vector<int64_t> tail;  // unsqueeze the [batch, max_len] mask to x's rank
    for (int i = 2; i < rank; ++i) tail.push_back(i);
    if (type == "FIRST") {
      std::string o = fresh("t");
      attr(node("Gather", {x, ints({0})}, {o}, op), "axis", int64_t(1));
      return bind(out_var(op, "Out"), apply("Squeeze", {o, ints({1})}, op));
    }
    std::string mask = step_mask(x, dt, op);
    std::string m = tail.empty() ? mask : apply("Unsqueeze", {mask, ints(tail)}, op);
    auto reduce = [&](const std::string& type2, const std::string& v) {
      std::string o = fresh("t");
      if (type2 == "ReduceSum") {
        attr(node(type2, {v, ints({1})}, {o}, op), "keepdims", int64_t(0));
      } else {
        auto& n = node(type2, {v}, {o}, op);
        attr(n, "axes", std::vector<int64_t>{1}), attr(n, "keepdims", int64_t(0));
      }
      return o;
    };
    if (type == "MAX") {
      std::string cond = fresh("t");
      attr(node("Cast", {m}, {cond}, op), "to", int64_t(::onnx::TensorProto::BOOL));
      auto sel = apply("Where", {cond, x, scalar(-std::numeric_limits<double>::infinity(), dt)}, op);
      return bind(out_var(op, "Out"), reduce("ReduceMax", sel));
    }
    if (type == "LAST") {  // the step at length - 1: a one-hot mask over the steps
      auto shp = apply("Shape", {x}, op);
      auto tl = apply("Squeeze", {apply("Gather", {shp, ints({1})}, op), ints({0})}, op);
      auto range = apply("Range", {scalar(0, DType::i64), tl, scalar(1, DType::i64)}, op);
      auto last = apply("Sub", {lengths_, scalar(1, DType::i64)}, op);
      auto eq = apply("Equal", {apply("Unsqueeze", {range, ints({0})}, op), apply("Unsqueeze", {last, ints({1})}, op)}, op);
      std::string f = fresh("t");
      attr(node("Cast", {eq}, {f}, op), "to", int64_t(detail::onnx_type(dt, "mask")));
      std::string fm = tail.empty() ? f : apply("Unsqueeze", {f, ints(tail)}, op);
      return bind(out_var(op, "Out"), reduce("ReduceSum", apply("Mul", {x, fm}, op)));
    }
    std::string sum = reduce("ReduceSum", apply("Mul", {x, m}, op));
    if (type == "SUM") return bind(out_var(op, "Out"), sum);
    std::string len = fresh("t");
    attr(node("Cast", {lengths_}, {len}, op), "to", int64_t(detail::onnx_type(dt, "lengths")));
    std::vector<int64_t> lt = {1};
    for (int i = 2; i < rank - 1; ++i) lt.push_back(i);
    std::string l2 = apply("Unsqueeze", {len, ints(lt)}, op);
    if (type == "AVERAGE") return bind(out_var(op, "Out"), apply("Div", {sum, l2}, op));
    if (type == "SQRT") return bind(out_var(op, "Out"), apply("Div", {sum, apply("Sqrt", {l2}, op)}, op));
    fail(op, fmt::format("has pooltype '{}', which is not exported", type));
  }

  void mul(const Operator& op) {
    const auto& xn = op.input("X").at(0);
    const auto& yn = op.input("Y").at(0);
    const Shape& xs = shape(xn);
    const Shape& ys = shape(yn);
    const int xk = op.attr<int32_t>("x_num_col_dims"), yk = op.attr<int32_t>("y_num_col_dims");
    std::string x = value(xn), y;
    // Y as a matrix [prod(dims < yk), prod(dims >= yk)].
    if (ys.rank() == 2 && yk == 1) {
      y = value(yn);
    } else if (const Tensor* t = param(yn)) {
      y = initializer(t->view(Shape{ys.numel(0, yk), ys.numel(yk, ys.rank())}), yn);
    } else {
      fail(op, fmt::format("multiplies by Y {} (y_num_col_dims {}) that is not a parameter", ys.str(), yk));
    }
    if (ys.rank() > yk + 1) fail(op, fmt::format("has Y {} with more than one output dim", ys.str()));
    // X flattened to [dims < xk..., prod(dims >= xk)]: MatMul then broadcasts over the leading dims, giving
    // Fluid's output dims (X's first xk, then Y's last).
    if (xs.rank() > xk + 1) {
      if (xk == 1) {
        std::string o = fresh("t");
        attr(node("Flatten", {x}, {o}, op), "axis", int64_t(1));
        x = o;
      } else {
        std::vector<int64_t> s(size_t(xk), 0);
        s.push_back(-1);
        x = apply("Reshape", {x, ints(s)}, op);
      }
    }
    bind(out_var(op, "Out"), apply("MatMul", {x, y}, op));
  }

  void matmul(const Operator& op) {
    const auto& xn = op.input("X").at(0);
    const auto& yn = op.input("Y").at(0);
    auto side = [&](const std::string& n, bool tr) {
      std::string v = value(n);
      const int r = shape(n).rank();
      if (!tr || r < 2) return v;
      std::vector<int64_t> perm;
      for (int i = 0; i < r; ++i) perm.push_back(i);
      std::swap(perm[size_t(r - 1)], perm[size_t(r - 2)]);
      std::string o = fresh("t");
      attr(node("Transpose", {v}, {o}, op), "perm", perm);
      return o;
    };
    std::string o = apply("MatMul", {side(xn, op.attr<bool>("transpose_X")), side(yn, op.attr<bool>("transpose_Y"))}, op);
    const float alpha = op.attr<float>("alpha");
    if (alpha != 1) o = apply("Mul", {o, scalar(alpha, dtype(xn))}, op);
    bind(out_var(op, "Out"), o);
  }

  void conv(const Operator& op) {
    if (op.attr_or<std::string>("data_format", "NCHW") != "NCHW") fail(op, "has a data_format other than NCHW");
    const auto& fn = op.input("Filter").at(0);
    const Shape& fs = shape(fn);
    auto p = op.attr<std::vector<int32_t>>("paddings");
    std::vector<std::string> args{in(op, "Input"), value(fn)};
    const bool fusion = op.type() == "conv2d_fusion";
    if (fusion) args.push_back(in(op, "Bias"));
    std::string o = fresh("t");
    auto& n = node("Conv", args, {o}, op);
    attr(n, "kernel_shape", std::vector<int64_t>{fs[2], fs[3]});
    attr(n, "pads", std::vector<int64_t>{p[0], p[1], p[0], p[1]});
    attr(n, "strides", i64(op.attr<std::vector<int32_t>>("strides")));
    attr(n, "dilations", i64(op.attr<std::vector<int32_t>>("dilations")));
    attr(n, "group", int64_t(op.attr<int32_t>("groups")));
    if (fusion && op.attr<std::string>("activation") == "relu") o = apply("Relu", {o}, op);
    bind(out_var(op, "Output"), o);
  }

  void pool(const Operator& op) {
    if (op.attr_or<std::string>("data_format", "NCHW") != "NCHW") fail(op, "has a data_format other than NCHW");
    const bool max = op.attr<std::string>("pooling_type") == "max";
    const auto k = i64(op.attr<std::vector<int32_t>>("ksize"));
    const bool global = op.attr<bool>("global_pooling") || (op.attr<bool>("adaptive") && k == std::vector<int64_t>{1, 1});
    if (global) return bind(out_var(op, "Out"), apply(max ? "GlobalMaxPool" : "GlobalAveragePool", {in(op, "X")}, op));
    if (op.attr<bool>("adaptive")) fail(op, fmt::format("pools adaptively to {}x{} (ONNX has only the global form)", k[0], k[1]));
    auto p = op.attr<std::vector<int32_t>>("paddings");
    std::string o = fresh("t");
    auto& n = node(max ? "MaxPool" : "AveragePool", {in(op, "X")}, {o}, op);
    attr(n, "kernel_shape", k);
    attr(n, "pads", std::vector<int64_t>{p[0], p[1], p[0], p[1]});
    attr(n, "strides", i64(op.attr<std::vector<int32_t>>("strides")));
    if (op.attr<bool>("ceil_mode")) attr(n, "ceil_mode", int64_t(1));
    if (!max) attr(n, "count_include_pad", int64_t(op.attr<bool>("exclusive") ? 0 : 1));
    bind(out_var(op, "Out"), o);
  }

  void layer_norm(const Operator& op) {
    const auto& xn = op.input("X").at(0);
    const Shape& xs = shape(xn);
    const int axis = op.attr<int32_t>("begin_norm_axis");
    const DType dt = dtype(xn);
    Shape norm;
    for (int i = axis; i < xs.rank(); ++i) norm.push_back(xs[i]);
    if (!norm.known()) fail(op, fmt::format("normalizes dims of unknown size of X {}", xs.str()));
    // oar keeps Scale and Bias flat ([prod(norm)]); ONNX wants them broadcastable to the normalized dims.
    auto affine = [&](std::string_view slot, double fill) {
      const auto& a = op.input(slot);
      if (a.empty()) {
        Tensor t(norm, dt);
        for (int64_t i = 0; i < t.numel(); ++i) dt == DType::f64 ? void(t.data<double>()[i] = fill) : void(t.data<float>()[i] = float(fill));
        return initializer(t, std::string(slot) == "Scale" ? "ln_scale" : "ln_bias");
      }
      if (const Tensor* t = param(a[0])) return norm.rank() == 1 ? value(a[0]) : initializer(t->view(norm), a[0]);
      return apply("Reshape", {value(a[0]), ints(std::vector<int64_t>(norm.begin(), norm.end()))}, op);
    };
    const float eps = op.attr<float>("epsilon");
    if (opt_.opset >= 17) {
      std::string o = fresh("t");
      auto& n = node("LayerNormalization", {value(xn), affine("Scale", 1), affine("Bias", 0)}, {o}, op);
      attr(n, "axis", int64_t(axis)), attr(n, "epsilon", eps);
      return bind(out_var(op, "Y"), o);
    }
    // Before opset 17: (x - mean) / sqrt(var + eps) * scale + bias over the last dims.
    std::vector<int64_t> axes;
    for (int i = axis; i < xs.rank(); ++i) axes.push_back(i);
    auto reduce_mean = [&](const std::string& v) {
      std::string o = fresh("t");
      attr(node("ReduceMean", {v}, {o}, op), "axes", axes);
      return o;
    };
    std::string x = value(xn);
    auto d = apply("Sub", {x, reduce_mean(x)}, op);
    auto var = reduce_mean(apply("Mul", {d, d}, op));
    auto y = apply("Div", {d, apply("Sqrt", {apply("Add", {var, scalar(eps, dt)}, op)}, op)}, op);
    y = apply("Add", {apply("Mul", {y, affine("Scale", 1)}, op), affine("Bias", 0)}, op);
    bind(out_var(op, "Y"), y);
  }

  void lookup(const Operator& op) {
    const auto& wn = op.input("W").at(0);
    const auto& idn = op.input("Ids").at(0);
    const int64_t pad = op.attr<int64_t>("padding_idx");
    std::string w;
    if (pad >= 0) {  // the padding row reads as zeros: export a table whose row is zero
      const Tensor* t = param(wn);
      if (!t) fail(op, "has a padding_idx and a table that is not a parameter");
      Tensor c = t->to(cpu(), true);
      const int64_t width = c.numel() / c.dim(0);
      std::memset(static_cast<char*>(c.raw()) + size_t(pad * width) * size_of(c.dtype()), 0, size_t(width) * size_of(c.dtype()));
      w = initializer(c, wn);
    } else {
      w = value(wn);
    }
    std::string ids = value(idn);
    const Shape& is = shape(idn);
    if (is.rank() >= 2 && is[is.rank() - 1] == 1) ids = apply("Squeeze", {ids, ints({-1})}, op);  // Fluid's [N, 1] ids
    bind(out_var(op, "Out"), apply("Gather", {w, ids}, op));
  }

  void reduce(const Operator& op) {
    static const std::map<std::string, std::string> names = {
        {"reduce_sum", "ReduceSum"}, {"reduce_mean", "ReduceMean"}, {"reduce_max", "ReduceMax"}, {"reduce_min", "ReduceMin"}};
    const auto& xn = op.input("X").at(0);
    const Shape& xs = shape(xn);
    std::vector<int64_t> axes;
    if (op.attr<bool>("reduce_all"))
      for (int i = 0; i < xs.rank(); ++i) axes.push_back(i);
    else
      for (auto d : op.attr<std::vector<int32_t>>("dim")) axes.push_back(d < 0 ? d + xs.rank() : d);
    const bool keep = op.attr<bool>("keep_dim");
    std::string o = fresh("t");
    const std::string& type = names.at(op.type());
    NodeProto* n;
    if (type == "ReduceSum") {  // its axes are an input from opset 13
      n = &node(type, {value(xn), ints(axes)}, {o}, op);
    } else {
      n = &node(type, {value(xn)}, {o}, op);
      attr(*n, "axes", axes);
    }
    attr(*n, "keepdims", int64_t(keep));
    if (!keep && axes.size() == size_t(xs.rank())) o = apply("Reshape", {o, ints({1})}, op);  // Fluid's [1]
    bind(out_var(op, "Out"), o);
  }
};

void check(::onnx::ModelProto& m) {
  try {
    ::onnx::checker::check_model(m);
    ::onnx::shape_inference::InferShapes(m, ::onnx::OpSchemaRegistry::Instance(), ::onnx::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    throw Error(fmt::format("export: ONNX's checker rejects the exported model: {}", e.what()));
  }
}

}  // namespace

void export_program(const Program& program, const Scope& scope, const std::filesystem::path& path, const ExportOptions& options) {
  if (options.opset < 13 || options.opset > kMaxOpset) throw Error(fmt::format("export: opset {} is outside 13..{}", options.opset, kMaxOpset));
  if (options.fetches.empty()) throw Error("export: no outputs to export (ExportOptions::fetches)");
  Program p = program.prune(options.fetches).clone(/*for_test=*/true);
  infer_program_shapes(p);
  std::vector<std::string> feeds;  // the feeds the pruned program still reads
  for (const auto& f : options.feeds)
    if (p.global_block().find_var(f)) feeds.push_back(f);
  ::onnx::ModelProto m = Exporter(p, scope, options).run(feeds, options.fetches);
  if (options.check) check(m);
  std::string bytes;
  if (!m.SerializeToString(&bytes)) throw Error(fmt::format("export: cannot serialize the model for '{}'", path.string()));
  oar::detail::write_file_atomic(path, bytes);
}

void export_model(const Model& model, const std::filesystem::path& path, const ExportOptions& options) {
  ExportOptions o = options;
  if (o.fetches.empty()) o.fetches = model.outputs();
  if (o.feeds.empty()) o.feeds = model.feeds();
  if (o.fetches.empty()) throw Error("export: the model has no outputs to export");
  export_program(model.program(), model.scope(), path, o);
}

void export_inference_model(const std::filesystem::path& model_dir, const std::filesystem::path& path, const ExportOptions& options) {
  export_model(Model::load_inference(model_dir), path, options);
}

}  // namespace oar::onnx
