// src/onnx/importer.hpp: the Importer that import_model runs (import.cpp): its state and the helpers every
// handler uses; the handlers, one per ONNX op type, live by family in import_elementwise.cpp, import_nn.cpp and
// import_shape.cpp. Private to liboar_onnx.
#pragma once
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

namespace oar::onnx::import_detail {

using ::onnx::NodeProto;
using TP = ::onnx::TensorProto;

/// A tensor's values as int64 (for shapes, axes, indices known at import time).
inline std::vector<int64_t> as_i64(const Tensor& t) {
  std::vector<int64_t> v(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = int64_t(t.get(i));
  return v;
}

inline Tensor i64_tensor(const std::vector<int64_t>& v, Shape s) { return Tensor::from<int64_t>(v, std::move(s)); }

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
      if (node_->output_size() == 0) throw Error(fmt::format("{}: {}: has no output", what_, where()));
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

  /// A constant the node needs, made a persistable (not trainable) variable named after the node's first
  /// output and `key`.
  std::string const_var(const std::string& key, Tensor t) {
    const std::string n = (node_ ? fmt::format("{}#{}", node_->output(0), index_) : std::string("graph")) + "/" + key;
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

  void h_unary();
  /// Before opset 7, Add and the like broadcast only when told (`broadcast`, `axis`): refused.
  void no_legacy_broadcast() const;
  void h_binary();
  static constexpr std::initializer_list<DType> kFloats = {DType::f32, DType::f64};
  static constexpr std::initializer_list<DType> kNumbers = {DType::f32, DType::f64, DType::i32, DType::i64};
  static constexpr std::initializer_list<DType> kBools = {DType::boolean};
  /// A binary op of Fluid's broadcast (Y over X's trailing dims), used where fused_elementwise does not
  /// reach: integer math, comparisons, logic. Numpy's broadcast is that one when Y's dims are X's last
  /// dims or Y holds one value; else X and Y swap when the op allows (`commutes`, or `flipped` names the
  /// op with its operands swapped), else the node is unsupported.
  void fluid_binary(std::string a, std::string b, const std::string& type, bool commutes, const std::string& flipped,
                    std::initializer_list<DType> dtypes, bool broadcasts);
  void h_compare();
  void h_logical();
  void h_not();
  void fold_int_binary(const std::string& t);
  static Tensor cast_const(const Tensor& t, DType to);
  /// What oar's cast converts between.
  void need_castable(DType from, DType to) const;
  std::string cast_to(const std::string& x, DType to);
  void h_variadic();
  void h_leaky_relu();
  void h_elu();
  void h_hard_sigmoid();
  void h_selu();
  void h_hard_swish();
  void h_prelu();
  void h_clip();
  void h_identity();
  void h_dropout();

  // ---- handlers: matrices, convolution, pooling, normalization

  void h_matmul();
  void h_gemm();
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
  void h_conv();
  void h_conv_transpose();
  void h_pool();
  void h_global_pool();
  void h_batch_norm();
  void h_layer_norm();
  void h_softmax();

  // ---- handlers: shapes and indexing

  void h_constant();
  void h_shape();
  void h_size();
  void h_constant_of_shape();
  void h_reshape();
  void h_flatten();
  void h_transpose();
  void h_concat();
  std::vector<int64_t> axes_arg(int input) const {
    if (opset_ >= 13) return has_in(input) ? as_i64(need_const(input, "axes")) : std::vector<int64_t>{};
    return ais("axes");
  }
  void h_squeeze();
  void h_unsqueeze();
  Tensor wrapped(const Tensor& idx, int64_t n) const;
  void h_gather();
  void h_cast();
  void h_slice();
  void h_reduce();
  /// exp(sum log |x|), negated when an odd number of the factors is negative: cos(pi * count).
  void reduce_prod(const std::string& x);
  void h_arg();
  void h_gather_elements();
  void h_cumsum();
  void h_onehot();
  void h_range();
  void h_expand();
  /// NegativeLogLikelihoodLoss over log-probabilities `x` [N, C, d1..dk] and class indices `target`
  /// [N, d1..dk], with optional class weights and ignore_index, into output 0: the class axis moved last and
  /// flattened to [M, C]; loss_m = -x[m, t_m] w_m with w_m = weight[t_m] (or 1), 0 where t_m is ignored (the
  /// index made 0 there, so that it stays in range); reduction none, sum, or mean = sum / sum of w.
  void nll(const std::string& x, const std::string& target, const std::string& weight);
  void h_nll();
  void h_softmax_xent();
  void h_sign();
  void h_thresholded_relu();
  void h_celu();
  void h_where();
  void h_topk();
  /// DepthToSpace and SpaceToDepth: a reshape to 6 dims, a transpose, a reshape back (the batch may be unknown).
  void h_depth_space();
  void h_instance_norm();
  void h_eye_like();
  void h_isnan();
  void h_isinf();
  void h_tile();
  void h_cast_like();
  void h_trilu();
  void h_hardmax();
  void h_mod();
  /// LSTM and GRU (one direction) as oar's lstm / gru over the sequences: the padded input unpadded by the
  /// lengths into a LoD batch, ONNX's input weights as a projection (oar's lstm and gru take projected input),
  /// the gates reordered into oar's order (GRU: oar's update gate u is ONNX's 1 - z, so z's weights and biases
  /// are negated), the per-step output padded back; Y_h / Y_c are each sequence's last step (first, reversed).
  void h_rnn();
  void h_split();
};

}  // namespace oar::onnx::import_detail
