// src/onnx/exporter.hpp: the Exporter that export_program runs (export.cpp): the ONNX graph being written, the
// names of its values and the helpers every op's mapping uses; the mappings live in export_ops.cpp (dispatch,
// element-wise and shape ops), export_nn.cpp (products, convolution, pooling, normalization, embedding,
// reductions, losses), export_sequence.cpp (padded sequences, LSTM / GRU, sequence_pool),
// export_attention.cpp (attention, position encodings) and export_attention_seq.cpp (attention over padded
// sequences). Private to liboar_onnx.
#pragma once
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

namespace oar::onnx::export_detail {

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
        // each feed its own symbolic length: one dim_param named twice tells ONNX the two are equal
        in.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(1)->set_dim_param(seq_.empty() ? "max_len" : f + "_max_len");
        const std::string lengths = f + "_lengths";
        used_.insert(lengths);
        value_info(*g_->add_input(), lengths, DType::i64, Shape{-1}, true);
        seq_[f] = lengths;
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
  // graph input `<feed>_lengths` of the feed they come from. seq_ maps the oar variables that are such padded
  // sequences to those lengths: each sequence is masked by its own feed's lengths (an encoder's source and a
  // decoder's target differ), and a row-wise op over two sequences pairs their rows, so they share one LoD.
  std::map<std::string, std::string> seq_;
  bool is_seq(const std::string& n) const { return seq_.count(n) != 0; }
  const std::string& lengths_of(const std::string& n) const { return seq_.at(n); }
  /// `out` is a padded sequence with the lengths of the sequence `from`.
  void mark_seq(const std::string& out, const std::string& from) { seq_[out] = seq_.at(from); }

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
  std::string unary(const std::string& name, float p0, float p1, const std::string& x, DType dt, const Operator& src);

  /// Y of a Fluid binary op, reshaped so that ONNX's right-aligned broadcast puts it where Fluid's `axis`
  /// does: Y's dims (trailing 1s dropped) followed by 1s up to X's last dim.
  std::string fluid_broadcast_y(const Operator& op, const std::string& xn, const std::string& yn, int axis);

  void fused(const Operator& op);

  // ---- the ops

  void emit(const Operator& op);

  void emit_dense(const Operator& op);

  /// softmax_with_cross_entropy (hard labels [N, 1]) as SoftmaxCrossEntropyLoss without reduction, its
  /// [N] losses made Fluid's [N, 1]; the Softmax output, when read, as Softmax.
  void softmax_xent(const Operator& op);

  /// An op over the rows of a padded sequence: those that act on each row alone run unchanged on [batch,
  /// max_len, ...] (their outputs are padded sequences too); others are refused.
  void row_wise(const Operator& op);

  /// reshape of a sequence's rows ([N, D] to [N, H, d] and back: attention's heads), the row count kept: the
  /// padded [batch, max_len, ...] reshaped with its two leading dims copied.
  void row_reshape(const Operator& op);

  /// 1 where a step lies inside its sequence: [batch, max_len] of `dt` (Range over max_len against lengths).
  /// [batch, max_len] of dtype `dt`: 1 where step t < lengths[b], for the padded value `x` with those lengths.
  std::string step_mask(const std::string& x, const std::string& lengths, DType dt, const Operator& op);

  /// lstm / gru over a padded [batch, max_len, gates] input as ONNX's LSTM / GRU with sequence_lens. oar's
  /// input projection is already applied, so the node's W is a 0/1 matrix routing oar's gate columns into
  /// ONNX's gate order (LSTM: oar c, i, f, o -> ONNX i, o, f, c; GRU: oar u, r, c -> ONNX z, r, h, with z = 1 -
  /// u made by negating u's weights and bias: sigmoid(-a) = 1 - sigmoid(a)). H0 / C0 [batch, D] become
  /// initial_h / initial_c [1, batch, D].
  void rnn(const Operator& op);
  std::set<std::string> seq_bad_;

  /// sequence_pool over a padded sequence, the padding masked out by the lengths.
  void sequence_pool(const Operator& op);

  void mul(const Operator& op);

  void matmul(const Operator& op);

  void conv(const Operator& op);

  void pool(const Operator& op);

  void layer_norm(const Operator& op);

  void lookup(const Operator& op);

  void reduce(const Operator& op);

  /// cross_entropy as its formula: -log x at the hard label (GatherElements; 0 at ignore_index) or -sum label
  /// log x over the last dim (soft), with Fluid's clamp of -log 0 to 1e20; Fluid's [..., 1] losses.
  void cross_entropy(const Operator& op);

  // ---- attention (export_attention.cpp)

  /// Dim `axis` of `x` at run time: an int64 scalar (Gather of Shape).
  std::string dim(const std::string& x, int64_t axis, const Operator& op);

  /// The positions along `time_axis` of `x`, plus `shift` and the op's Offset (one per batch row) when it has
  /// one: f64 [T], or [B, T] with Offset (Range over the dim at run time).
  std::string positions(const std::string& x, int64_t time_axis, int64_t shift, const Operator& op);

  /// add_position_encoding (dense [B, T, D] or a padded sequence [B, T, D]) and rotary_position_embedding
  /// (dense [B, H, T, d] or a padded sequence [B, T, H, d], whose positions are the padded steps): sines and
  /// cosines of positions times frequencies, computed in f64 as oar's kernels do, cast to X's dtype.
  void position(const Operator& op);

  /// scaled_dot_product_attention: the dense form directly, the LoD form through attention_seq.
  void attention(const Operator& op);

  /// The scale of the scores: the op's, or 1 / sqrt(d) for the head size d, the last dim of Q's shape `qs`. Refuses
  /// the op when it drops weights at random (is_test off), which an inference graph does not.
  double attention_scale(const Operator& op, const Shape& qs);

  /// Softmax(q k^T scale + mask) v over ONNX values q [B, H, Tq, d], k [B, H, Tk, d], v [B, H, Tk, dv] of dtype
  /// dt: the op's Mask (float: added; bool: false drops the key), its causal mask (Range over Tq and Tk at run
  /// time), and `keep`, a 0/1 mask of dtype dt that broadcasts to [B, H, Tq, Tk] (empty: none). A query row whose
  /// keys are all masked gives zeros, as in oar. Returns [B, H, Tq, dv].
  std::string attend(const Operator& op, const std::string& q, const std::string& k, const std::string& v, DType dt, double scale,
                     const std::string& keep);

  /// scaled_dot_product_attention over LoD sequences (export_attention_seq.cpp): the padded Q, K, V [B, T, H,
  /// d] transposed to [B, H, T, d], the dense attention with the keys past each sequence's length masked out,
  /// transposed back to a padded sequence [B, T, H, dv]. Q and K have the graph's one set of lengths, so the
  /// causal mask of the padded steps is each sequence's own.
  void attention_seq(const Operator& op);
};

}  // namespace oar::onnx::export_detail
