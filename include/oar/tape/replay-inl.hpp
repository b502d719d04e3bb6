// oar/tape/replay-inl.hpp: the implementation of replay.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/tape/replay.hpp"

#include <algorithm>

#include "oar/ops/elementwise.hpp"
#include "oar/ops/elementwise_binary.hpp"
#include "oar/ops/softmax.hpp"

namespace oar {

OAR_FUNC std::vector<std::string> ReplayContext::replay_children(size_t parent) {
  std::vector<std::string> last;
  for (size_t i = parent + 1; i < tape.creations.size(); ++i)
    if (tape.creations[i].parent == int(parent) && included[i]) replay(i);
  return last;
}

OAR_FUNC void ReplayContext::replay(size_t i) {
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

OAR_FUNC const std::string& LayerHelper::input(size_t i) const {
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

OAR_FUNC DType LayerHelper::input_dtype(size_t from, size_t to) const {
  to = std::min(to, num_inputs());
  OAR_CHECK(from < to, "{}: no inputs", c_.kind);
  DType t = input_var(from).dtype();
  for (size_t i = from + 1; i < to; ++i)
    if (input_var(i).dtype() != t)
      throw Error(fmt::format("{}: inputs must share one dtype, but {} is {} and {} is {}", c_.kind, input(from), oar::name(t), input(i), oar::name(input_var(i).dtype())), c_.origin);
  return t;
}

OAR_FUNC void LayerHelper::apply_options(Operator& op) {
  const OpDef& d = op_def(op.type());
  for (auto& [k, v] : c_.opts.attrs)
    if (d.find_attr(k)) {
      op.set_attr(k, v);
      consumed_.insert(k);
    }
}

OAR_FUNC const ParamAttr& LayerHelper::param_attr(size_t i) const {
  static const ParamAttr dflt;
  if (c_.opts.params.empty()) return dflt;
  return c_.opts.params.size() == 1 ? c_.opts.params[0] : c_.opts.params.at(i);
}

OAR_FUNC Variable& LayerHelper::create_parameter(const ParamAttr& attr, Shape shape, DType dtype, bool is_bias, std::optional<Initializer> dflt) {
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
  sp.set_origin(c_.origin);
  init.emit(startup(), sp);
  ctx_.shared_owner[pname] = c_.origin.str();
  return p;
}

OAR_FUNC Variable& LayerHelper::create_tmp(DType dtype, bool stop_gradient) {
  Variable& v = block().create_var(ctx_.names(name() + ".tmp"), {.dtype = dtype});
  v.set_stop_gradient(stop_gradient);
  return v;
}

OAR_FUNC Variable& LayerHelper::create_global(const std::string& var_name, Shape shape, DType dtype, Initializer init) {
  Variable& v = main().global_block().create_var(var_name, {.dtype = dtype, .shape = shape, .persistable = true});
  v.set_stop_gradient(true);
  Variable& sv = startup().global_block().create_var(var_name, {.dtype = dtype, .shape = shape, .persistable = true});
  sv.set_origin(c_.origin);
  init.emit(startup(), sv);
  return v;
}

OAR_FUNC std::string LayerHelper::append_bias(const std::string& x, int dim_start, int dim_end) {
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

OAR_FUNC std::string LayerHelper::append_activation(const std::string& x) {
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

OAR_FUNC int LayerHelper::replay_body() {
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

OAR_FUNC void ReplayContext::select(const std::vector<Var>& outputs, const std::set<size_t>& skipped, bool only_needed) {
  const auto& cs = tape.creations;
  const size_t n = cs.size();
  auto top = [&](size_t i) {
    while (cs[i].parent >= 0) i = size_t(cs[i].parent);
    return i;
  };
  std::vector<std::vector<size_t>> children(n);
  for (size_t i = 0; i < n; ++i)
    if (cs[i].parent >= 0) children[size_t(cs[i].parent)].push_back(i);
  // What the outputs need. An owner needs its body, except the body's own Branches: those open like any other.
  std::vector<bool> needed(n, false);
  std::vector<size_t> todo;
  size_t last = 0;
  for (auto& o : outputs) {
    todo.push_back(o.index());
    last = std::max(last, top(o.index()));
  }
  while (!todo.empty()) {
    size_t i = todo.back();
    todo.pop_back();
    if (needed[i] || skipped.count(i)) continue;  // using a skipped creation is reported at replay
    needed[i] = true;
    for (auto& in : cs[i].inputs) todo.push_back(in.index());
    if (cs[i].parent >= 0) todo.push_back(size_t(cs[i].parent));
    for (size_t k : children[i])
      if (cs[k].branches.size() <= cs[i].branches.size()) todo.push_back(k);
  }
  std::set<int> open;
  for (size_t i = 0; i < n; ++i)
    if (needed[i]) open.insert(cs[i].branches.begin(), cs[i].branches.end());
  // `lost`: left out by a Branch, or reading such a creation; what nobody chose goes with it. An owner whose
  // body reads a lost creation is lost too; its body comes after it, hence the passes.
  std::vector<bool> lost(n, false), owner_lost(n, false);
  for (bool again = true; again;) {
    std::fill(lost.begin(), lost.end(), false);
    included.assign(n, false);
    for (size_t i = 0; i < n; ++i) {
      const Creation& c = cs[i];
      if (top(i) > last || skipped.count(i)) continue;
      bool in = !owner_lost[i];
      for (int b : c.branches) in = in && open.count(b);
      if (c.parent >= 0) in = in && included[size_t(c.parent)];
      if (only_needed && c.parent < 0) in = in && needed[i];
      if (!needed[i])
        for (auto& v : c.inputs) in = in && !lost[v.index()];
      included[i] = in;
      lost[i] = !in;
    }
    again = false;
    for (size_t i = 0; i < n; ++i)
      if (included[i])
        for (size_t k : children[i])
          if (lost[k] && cs[k].branches.size() <= cs[i].branches.size()) again = owner_lost[i] = true;
  }
}

OAR_FUNC Topology Tape::program(const std::vector<Var>& outputs, const Skip& skip) const {
  OAR_CHECK(!outputs.empty(), "Tape::program needs at least one output");
  for (auto& o : outputs)
    if (!owns(o)) throw Error(fmt::format("Tape::program: output {} belongs to another oar::Tape", o.valid() ? o.kind() : std::string("(empty Var)")));
  std::set<size_t> skipped;
  for (auto& s : skip.vars) {
    if (!owns(s)) throw Error("oar::skip: a Var belongs to another oar::Tape");
    skipped.insert(s.index());
  }
  const auto& cs = state_->creations;
  ReplayContext ctx(*state_);
  ctx.select(outputs, skipped, false);
  for (size_t i = 0; i < cs.size(); ++i)
    if (cs[i].parent < 0 && ctx.included[i]) ctx.replay(i);
  for (auto& o : outputs) ctx.topo.outputs.push_back(ctx.topo.name_of(o));
  // Feeds: the data variables some op of the program reads (a data layer nothing uses is not fed), with or
  // without stop_gradient (`.stop_gradient(false)` asks for the gradient of a data input, which is still fed).
  std::set<std::string> read;
  for (size_t b = 0; b < ctx.topo.main.num_blocks(); ++b)
    for (auto* op : ctx.topo.main.block(int(b)).ops())
      for (auto& n : op->input_names()) read.insert(n);
  for (auto* v : ctx.topo.main.global_block().vars())
    if (!v->persistable() && !v->writer() && v->kind() == VarKind::lod_tensor && v->origin().what == "data" && read.count(v->name()))
      ctx.topo.feeds.push_back(v->name());
  ctx.topo.tape = state_.get();
  ctx.topo.param_slot = state_->param_slot;
  return std::move(ctx.topo);
}

OAR_FUNC detail::VarInfo Var::info() const {
  detail::TapeState& s = state();
  if (s.infos_version != s.version) {
    s.infos.clear();
    s.infos_version = s.version;
  }
  if (auto it = s.infos.find(index_); it != s.infos.end()) return it->second.at(size_t(output_));
  ReplayContext ctx(s);
  ctx.select({*this}, {}, true);
  try {
    for (size_t i = 0; i < s.creations.size(); ++i)
      if (s.creations[i].parent < 0 && ctx.included[i]) ctx.replay(i);
  } catch (Error& e) {
    e.add_context(fmt::format("while working out the shape and dtype of {} recorded at {}", kind(), origin().str()), origin());
    throw;
  }
  // Every creation replayed here is complete (its inputs and body came with it), so all of them are cached.
  const Program& p = ctx.topo.main;
  for (size_t i = 0; i < s.creations.size(); ++i) {
    if (!ctx.included[i]) continue;
    std::vector<detail::VarInfo> outs;
    for (auto& name : ctx.topo.creation_outputs[i]) {
      const Variable* v = nullptr;
      for (size_t b = 0; b < p.num_blocks() && !v; ++b) v = p.block(int(b)).find_var(name);
      OAR_CHECK(v, "{}: output '{}' is in no block of the replayed program", s.creations[i].kind, name);
      outs.push_back({v->shape(), v->dtype(), v->lod_level()});
    }
    s.infos[i] = std::move(outs);
  }
  const auto& mine = s.infos[index_];
  if (mine.size() <= size_t(output_))
    throw Error(fmt::format("{} has {} output(s) at replay, so it has no output {}", kind(), mine.size(), output_), origin());
  return mine[size_t(output_)];
}

OAR_FUNC std::vector<Var> record_layer(std::string kind, std::vector<Var> inputs, ReplayFn replay, std::source_location loc, int num_outputs) {
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

}  // namespace oar
