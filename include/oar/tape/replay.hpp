// oar/tape/replay.hpp: replaying a tape (ReplayContext, Tape::program) and LayerHelper, the one helper
// every layer function uses at replay: unique names, parameters (ParamAttr > layer default > Xavier / zero),
// temporaries, ops with the user's line, bias with `axis`, activation, multiple inputs.
#pragma once
#include <atomic>
#include <map>
#include <tuple>

#include "oar/ops/elementwise.hpp"
#include "oar/ops/elementwise_binary.hpp"
#include "oar/ops/softmax.hpp"
#include "oar/tape/tape.hpp"

namespace oar {

/// The state of one replay: the programs being built, unique names, and what each creation became.
struct ReplayContext {
  const detail::TapeState& tape;
  Topology topo;
  NameGenerator names;
  std::vector<bool> included;
  std::map<std::tuple<int, int, int>, std::string> shared_params;  // (shared id, ordinal, param #) -> name
  std::map<std::string, std::string> shared_owner;                 // param name -> recorded line of its first user

  explicit ReplayContext(const detail::TapeState& t) : tape(t) { topo.creation_outputs.resize(t.creations.size()); }
  void replay(size_t i);
  /// Replays the creations recorded in `parent`'s body into the main program's current block.
  std::vector<std::string> replay_children(size_t parent) {
    std::vector<std::string> last;
    for (size_t i = parent + 1; i < tape.creations.size(); ++i)
      if (tape.creations[i].parent == int(parent) && included[i]) replay(i);
    return last;
  }
};

class LayerHelper {
 public:
  LayerHelper(ReplayContext& ctx, const Creation& c, size_t index) : ctx_(ctx), c_(c), index_(index) {}

  const Creation& creation() const { return c_; }
  size_t index() const { return index_; }
  const std::string& kind() const { return c_.kind; }
  Origin origin() const { return c_.origin; }
  ReplayContext& context() const { return ctx_; }
  Program& main() const { return ctx_.topo.main; }
  Program& startup() const { return ctx_.topo.startup; }
  Block& block() const { return main().current_block(); }

  /// The layer's unique name: `.name(...)` or `<kind>_<n>`.
  const std::string& name() {
    if (name_.empty()) name_ = c_.opts.name.empty() ? ctx_.names(c_.kind) : c_.opts.name;
    return name_;
  }

  // ---- inputs
  size_t num_inputs() const { return c_.inputs.size(); }
  const std::string& input(size_t i = 0) const {
    const Var& v = c_.inputs.at(i);
    const auto& outs = ctx_.topo.creation_outputs[v.index()];
    if (outs.size() <= size_t(v.output())) {
      const Creation& src = ctx_.tape.creations[v.index()];
      throw Error(fmt::format("{} uses {} (recorded at {}), which is not part of this program: it is skipped, in a branch that was not chosen, or "
                              "recorded after the chosen outputs",
                              c_.kind, src.kind, src.origin.str()),
                  c_.origin);
    }
    return outs[size_t(v.output())];
  }
  Variable& input_var(size_t i = 0) const { return block().var_recursive(input(i)); }
  /// The dtype shared by all inputs (an error naming them when they differ).
  DType input_dtype(size_t from = 0, size_t to = size_t(-1)) const {
    to = std::min(to, num_inputs());
    OAR_CHECK(from < to, "{}: no inputs", c_.kind);
    DType t = input_var(from).dtype();
    for (size_t i = from + 1; i < to; ++i)
      if (input_var(i).dtype() != t)
        throw Error(fmt::format("{}: inputs must share one dtype, but {} is {} and {} is {}", c_.kind, input(from), oar::name(t), input(i), oar::name(input_var(i).dtype())), c_.origin);
    return t;
  }

  // ---- options
  bool has_option(const std::string& key) const { return c_.opts.attrs.count(key) != 0; }
  /// A layer option set with `.set(key, v)`, or `dflt`. Options nobody reads are reported after replay.
  template <class T>
  T option(const std::string& key, T dflt) {
    consumed_.insert(key);
    auto it = c_.opts.attrs.find(key);
    if (it == c_.opts.attrs.end()) return dflt;
    try {
      return attr_as<T>(it->second, key);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: option '{}': {}", c_.kind, key, e.message()), c_.origin);
    }
  }
  /// Copies every option that names an attribute of `op`'s schema onto it (overriding the layer's value).
  void apply_options(Operator& op) {
    const OpDef& d = op_def(op.type());
    for (auto& [k, v] : c_.opts.attrs)
      if (d.find_attr(k)) {
        op.set_attr(k, v);
        consumed_.insert(k);
      }
  }
  const std::set<std::string>& consumed() const { return consumed_; }

  const ParamAttr& param_attr(size_t i = 0) const {
    static const ParamAttr dflt;
    if (c_.opts.params.empty()) return dflt;
    return c_.opts.params.size() == 1 ? c_.opts.params[0] : c_.opts.params.at(i);
  }
  ParamAttr bias_attr() const { return c_.opts.bias ? *c_.opts.bias : ParamAttr(); }

  // ---- variables
  /// A parameter: a name from `attr` shares it; inside oar::shared the same call position reuses it; otherwise
  /// a new `<name>.w_<n>` / `<name>.b_<n>`. Its init op goes to the startup program.
  Variable& create_parameter(const ParamAttr& attr, Shape shape, DType dtype, bool is_bias, std::optional<Initializer> dflt = {}) {
    OAR_CHECK(attr.enabled, "{}: create_parameter with a disabled ParamAttr", c_.kind);
    Block& g = main().global_block();
    int param_no = params_made_++;
    std::string pname = attr.name;
    auto key = std::make_tuple(c_.share.first, c_.share.second, param_no);
    if (pname.empty() && c_.share.first >= 0) {
      auto it = ctx_.shared_params.find(key);
      if (it != ctx_.shared_params.end()) pname = it->second;
    }
    if (pname.empty()) pname = ctx_.names(name() + (is_bias ? ".b" : ".w"));
    if (c_.share.first >= 0) ctx_.shared_params.emplace(key, pname);
    if (g.has_var(pname)) {
      Variable& v = g.var(pname);
      if (!v.is_parameter() || v.shape() != shape || v.dtype() != dtype)
        throw Error(fmt::format("{}: parameter '{}' is shared with {} but has shape {} {} there and {} {} here", c_.kind, pname, ctx_.shared_owner[pname],
                                v.shape().str(), oar::name(v.dtype()), shape.str(), oar::name(dtype)),
                    c_.origin);
      return v;
    }
    Initializer init = attr.initializer ? *attr.initializer : dflt ? *dflt : is_bias ? Constant(0) : Xavier();
    ParamInfo info;
    info.trainable = attr.trainable;
    info.initializer = init.str();
    info.learning_rate = float(attr.learning_rate);
    if (attr.regularizer) {
      info.regularizer = attr.regularizer->kind == Regularizer::Kind::l1 ? "l1" : "l2";
      info.regularizer_coeff = attr.regularizer->coeff;
    }
    if (attr.gradient_clip) {
      static const char* kinds[] = {"value", "norm", "global_norm"};
      info.gradient_clip = kinds[int(attr.gradient_clip->kind)];
      info.clip_a = attr.gradient_clip->a;
      info.clip_b = attr.gradient_clip->b;
    }
    Variable& p = g.create_parameter(pname, dtype, shape, info);
    p.set_origin(c_.origin);
    Variable& sp = startup().global_block().create_parameter(pname, dtype, shape, info);
    init.emit(startup(), sp);
    ctx_.shared_owner[pname] = c_.origin.str();
    return p;
  }
  /// A temporary `<name>.tmp_<n>` in the current block.
  Variable& create_tmp(DType dtype, bool stop_gradient = false) {
    Variable& v = block().create_var(ctx_.names(name() + ".tmp"), {.dtype = dtype});
    v.set_stop_gradient(stop_gradient);
    return v;
  }
  /// A global persistable variable (not a parameter) initialized in the startup program.
  Variable& create_global(const std::string& var_name, Shape shape, DType dtype, Initializer init) {
    Variable& v = main().global_block().create_var(var_name, {.dtype = dtype, .shape = shape, .persistable = true});
    v.set_stop_gradient(true);
    Variable& sv = startup().global_block().create_var(var_name, {.dtype = dtype, .shape = shape, .persistable = true});
    init.emit(startup(), sv);
    return v;
  }

  // ---- ops
  /// Appends `op` to the current block (validated, shapes inferred), stamped with the user's line.
  Operator& append_op(Operator op) {
    op.set_origin(c_.origin);
    return add_op(block(), std::move(op));
  }
  /// x + bias, the bias of shape x.shape[dim_start:dim_end] added with elementwise_add's `axis` = dim_start.
  std::string append_bias(const std::string& x, int dim_start, int dim_end = -1) {
    ParamAttr attr = bias_attr();
    if (!attr.enabled) return x;
    const Variable& xv = block().var_recursive(x);
    Shape s = xv.shape().slice(dim_start, dim_end < 0 ? xv.shape().rank() : dim_end);
    Variable& b = create_parameter(attr, s, xv.dtype(), true);
    Variable& out = create_tmp(xv.dtype());
    using Add = ops::ElementwiseAdd;
    Operator op{std::string(Add::type)};
    op.set_input(Add::x, {x}).set_input(Add::y, {b.name()}).set_output(Add::out, {out.name()}).set_attr(Add::axis, int32_t(dim_start));
    append_op(std::move(op));
    return out.name();
  }
  /// The layer's `.act(...)` applied to x (x unchanged when none).
  std::string append_activation(const std::string& x) {
    const Activation& a = c_.opts.act;
    if (a.empty()) return x;
    Variable& out = create_tmp(block().var_recursive(x).dtype());
    // Every activation (a unary element-wise op, softmax, log_softmax) has relu's slots.
    static_assert(ops::Softmax::x == ops::ReluOp::x && ops::Softmax::out == ops::ReluOp::out);
    static_assert(ops::LogSoftmax::x == ops::ReluOp::x && ops::LogSoftmax::out == ops::ReluOp::out);
    Operator op(a.type);
    op.set_input(ops::ReluOp::x, {x}).set_output(ops::ReluOp::out, {out.name()});
    for (auto& [k, v] : a.attrs) op.set_attr(k, v);
    append_op(std::move(op));
    return out.name();
  }
  /// Replays this creation's body (sub-tape) into a new sub-block of the current block; returns its index.
  int replay_body() {
    Block& sub = main().create_block();
    try {
      ctx_.replay_children(index_);
    } catch (...) {
      main().rollback();
      throw;
    }
    main().rollback();
    return sub.idx();
  }
  /// The name a Var got in this replay.
  const std::string& name_of(const Var& v) const { return ctx_.topo.name_of(v); }

 private:
  ReplayContext& ctx_;
  const Creation& c_;
  size_t index_;
  std::string name_;
  int params_made_ = 0;
  std::set<std::string> consumed_;
};

// ---- implementation

inline void ReplayContext::replay(size_t i) {
  const Creation& c = tape.creations[i];
  LayerHelper h(*this, c, i);
  std::vector<std::string> outs;
  try {
    outs = c.replay(h);
    for (auto& [k, v] : c.opts.attrs)
      if (!h.consumed().count(k)) throw Error(fmt::format("{} does not take the option '{}'", c.kind, k), c.origin);
    if (!c.opts.name.empty() && outs.size() == 1 && outs[0] != c.opts.name) {
      Block& b = topo.main.current_block();
      if (b.find_var(c.opts.name))
        throw Error(fmt::format("{}: the name '{}' is already used by another variable", c.kind, c.opts.name), c.origin);
      if (b.has_var(outs[0])) {
        b.rename_var(outs[0], c.opts.name);
        outs[0] = c.opts.name;
      }
    }
    if (c.opts.stop_gradient)
      for (auto& n : outs) topo.main.current_block().var_recursive(n).set_stop_gradient(*c.opts.stop_gradient);
  } catch (Error& e) {
    if (!e.origin().known()) e.add_context(fmt::format("while replaying {} recorded at {}", c.kind, c.origin.str()), c.origin);
    throw;
  }
  topo.creation_outputs[i] = std::move(outs);
}

inline Topology Tape::program(const std::vector<Var>& outputs, const Skip& skip) const {
  OAR_CHECK(!outputs.empty(), "Tape::program needs at least one output");
  const auto& cs = state_->creations;
  auto top = [&](size_t i) {
    while (cs[i].parent >= 0) i = size_t(cs[i].parent);
    return i;
  };
  size_t last = 0;
  std::set<int> open;
  for (auto& o : outputs) {
    if (!owns(o)) throw Error(fmt::format("Tape::program: output {} belongs to another oar::Tape", o.valid() ? o.kind() : std::string("(empty Var)")));
    last = std::max(last, top(o.index()));
    for (size_t i = o.index();; i = size_t(cs[i].parent)) {
      open.insert(cs[i].branches.begin(), cs[i].branches.end());
      if (cs[i].parent < 0) break;
    }
  }
  std::set<size_t> skipped;
  for (auto& s : skip.vars) {
    if (!owns(s)) throw Error("oar::skip: a Var belongs to another oar::Tape");
    skipped.insert(s.index());
  }
  ReplayContext ctx(*state_);
  ctx.included.assign(cs.size(), false);
  for (size_t i = 0; i < cs.size(); ++i) {
    const Creation& c = cs[i];
    bool in = top(i) <= last && !skipped.count(i);
    for (int b : c.branches) in = in && open.count(b);
    if (c.parent >= 0) in = in && ctx.included[size_t(c.parent)];
    ctx.included[i] = in;
  }
  for (size_t i = 0; i < cs.size(); ++i)
    if (cs[i].parent < 0 && ctx.included[i]) ctx.replay(i);
  for (auto& o : outputs) ctx.topo.outputs.push_back(ctx.topo.name_of(o));
  // Feeds: the data variables some op of the program reads (a data layer nothing uses is not fed).
  std::set<std::string> read;
  for (size_t b = 0; b < ctx.topo.main.num_blocks(); ++b)
    for (auto* op : ctx.topo.main.block(int(b)).ops())
      for (auto& n : op->input_names()) read.insert(n);
  for (auto* v : ctx.topo.main.global_block().vars())
    if (v->stop_gradient() && !v->persistable() && !v->writer() && v->kind() == VarKind::lod_tensor && v->origin().what == "data" && read.count(v->name()))
      ctx.topo.feeds.push_back(v->name());
  ctx.topo.tape = state_.get();
  ctx.topo.param_slot = state_->param_slot;
  return std::move(ctx.topo);
}

/// Records a layer; `replay` runs when the tape is replayed. The building block of every layer function.
inline std::vector<Var> record_layer(std::string kind, std::vector<Var> inputs, ReplayFn replay, std::source_location loc, int num_outputs = 1) {
  Origin origin(loc, kind);
  Tape& t = Tape::current(origin);
  Creation c;
  c.kind = std::move(kind);
  c.origin = std::move(origin);
  c.inputs = std::move(inputs);
  c.replay = std::move(replay);
  c.num_outputs = num_outputs;
  return t.record(std::move(c));
}

/// Wraps a callable so that every call reuses the parameters of the first: the i-th parameter-creating
/// layer of each call shares the i-th one's parameters (two texts, one projection).
template <class F>
class Shared {
 public:
  explicit Shared(F f) : f_(std::move(f)), id_(next_id()) {}
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    Tape& t = Tape::current();
    t.push_share(id_);
    struct Pop {
      Tape& t;
      ~Pop() { t.pop_share(); }
    } pop{t};
    return f_(std::forward<Args>(args)...);
  }

 private:
  static int next_id() {
    static std::atomic<int> n{0};
    return n++;
  }
  F f_;
  int id_;
};
template <class F> Shared<F> shared(F f) { return Shared<F>(std::move(f)); }

}  // namespace oar
