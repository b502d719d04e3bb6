// oar/runtime/prepare-inl.hpp: preparing a block (part of the executor's implementation, included by
// executor-inl.hpp): its variables made in the scopes, each op's kernel and decoded attributes, what must be fed,
// and whether a CUDA graph may be made of it.
#pragma once
#include "oar/runtime/executor.hpp"

#include <algorithm>
#include <set>

#include "oar/ops/registry.hpp"

namespace oar {

OAR_FUNC std::shared_ptr<PreparedBlock> Executor::prepare(const Program& program, Scope& scope, int block, PrepareOptions options) {
  return prepare(std::make_shared<const Program>(program), scope, block, options);
}

OAR_FUNC std::shared_ptr<PreparedBlock> Executor::prepare(std::shared_ptr<const Program> program, Scope& scope, int block, PrepareOptions options) {
  auto p = std::make_shared<PreparedBlock>();
  p->program_ = std::move(program);
  p->block_ = block;
  p->options_ = options;
  bind(*p, scope);
  return p;
}

OAR_FUNC size_t Executor::fingerprint(const Program& p) {
  size_t h = p.num_blocks();
  for (size_t i = 0; i < p.num_blocks(); ++i) h = h * 1000003u + p.block(int(i)).num_ops() * 131u + p.block(int(i)).num_vars();
  return h;
}

OAR_FUNC std::shared_ptr<PreparedBlock> Executor::prepare_like(const PreparedBlock& proto, Scope& scope) {
  auto p = std::make_shared<PreparedBlock>();
  p->program_ = proto.program_;
  p->block_ = proto.block_;
  p->options_ = proto.options_;
  bind(*p, scope, &proto);
  return p;
}

namespace detail {
/// Whether `n` fills a state slot of `op` (its own value from an earlier run: never a feed).
inline bool is_state_input(const OpDef& def, const Operator& op, const std::string& n) {
  for (const SlotArgs& s : op.inputs())
    if (const SlotDef* sd = def.find_input(s.slot); sd && sd->state && std::find(s.args.begin(), s.args.end(), n) != s.args.end()) return true;
  return false;
}
}  // namespace detail

OAR_FUNC void Executor::bind(PreparedBlock& p, Scope& scope, const PreparedBlock* proto) {
  if (p.scope_ && p.local_) p.scope_->drop(p.local_);
  p.steps_.clear();
  p.required_feeds_.clear();
  p.scope_ = &scope;
  p.local_ = &scope.new_scope();
  p.arrays_.clear();
  const Block& b = p.program_->block(p.block_);
  for (const Block* blk = &b; blk; blk = blk->parent()) {
    // A sub-block's own variables always live in its scope: a recurrent step's in its step scope, whatever the
    // outer scopes hold (its grad block declares the per-step parameter gradients under the outer names).
    const bool own = blk == &b && b.parent();
    for (auto* v : blk->vars()) {
      if (v->persistable()) {
        if (!scope.find(v->name())) scope.var(v->name()).init(v->kind());
      } else if (!p.local_->find_local(v->name()) && (own || !scope.find(v->name()))) {
        // A non-persistable variable the caller's scope already holds (a gradient computed by an earlier
        // program run in that scope, say) is used from there; the rest are temporaries of this run.
        Value& val = p.local_->var(v->name());
        val.init(v->kind());
        if (v->kind() == VarKind::lod_tensor_array) p.arrays_.push_back(&val);
      }
    }
  }
  std::set<std::string> written;
  for (auto* op : b.ops()) {
    const OpDef* def = OpRegistry::instance().find(op->type());
    if (def && def->run_by == RunBy::feed) {  // a program's own feed ops name what must be fed
      for (auto& n : op->output_names()) {
        written.insert(n);
        p.required_feeds_.push_back(n);
      }
      continue;
    }
    for (auto& n : op->input_names()) {
      if (written.count(n) || n == "@EMPTY@" || (def && detail::is_state_input(*def, *op, n))) continue;
      const Variable* v = b.find_var(n);
      if (v && !v->persistable() && v->kind() == VarKind::lod_tensor && !scope.find(n) &&
          std::find(p.required_feeds_.begin(), p.required_feeds_.end(), n) == p.required_feeds_.end())
        p.required_feeds_.push_back(n);
    }
    for (auto& n : op->output_names()) written.insert(n);
  }
  const bool reuse = proto && proto->program_ == p.program_ && proto->block_ == p.block_ && proto->steps_.size() == b.num_ops();
  for (auto* op : b.ops()) {
    if (reuse) {
      const PreparedBlock::Step& ps = proto->steps_[p.steps_.size()];
      p.steps_.push_back({op, ps.fn, ps.attrs, KernelContext(*op, *p.local_, *dev_, ps.attrs.get()), {}, {}});
      p.steps_.back().run_by = ps.run_by;
      continue;
    }
    const OpDef& d = op_def(op->type());
    const bool feed_or_fetch = d.run_by == RunBy::feed || d.run_by == RunBy::fetch;
    // feed and fetch ops move values through the program's feed/fetch lists, which are no model state.
    if (p.options_.read_only_persistables && !feed_or_fetch)
      for (auto& n : op->output_names())
        if (const Variable* v = b.find_var(n); v && v->persistable())
          throw Error(fmt::format("op '{}' writes the persistable variable '{}' in a program that may only read them (an Evaluator's: "
                                  "parameters and running statistics are shared by every evaluator of the model)",
                                  op->type(), n),
                      op->origin());
    KernelFn fn = nullptr;
    std::shared_ptr<const void> attrs;
    if (d.run_by == RunBy::kernel) {
      const KernelEntry& k = KernelRegistry::instance().get(op->type(), place_, op->origin());
      fn = k.on(place_);
      attrs = k.attrs(*op, d.is_grad ? OpRegistry::instance().find(op->type().substr(0, op->type().size() - 5)) : &d);
    } else if (!feed_or_fetch) {
      // The control ops use their variables' values directly (step scopes, states, arrays), not through a
      // kernel's checked in() / out(): each must be one (a program read from a damaged file may name none).
      for (const auto* list : {&op->inputs(), &op->outputs()})
        for (const SlotArgs& s : *list)
          for (const std::string& n : s.args)
            if (n != kEmptyVarName && !p.local_->find(n))
              throw Error(fmt::format("op '{}': {} '{}' is no variable of the program", op->type(), s.slot, n), op->origin());
    }
    p.steps_.push_back({op, fn, attrs, KernelContext(*op, *p.local_, *dev_, attrs.get()), {}, {}});
    p.steps_.back().run_by = d.run_by;
  }
  p.free_.clear();
  p.plan();
  p.graph_ = {};
  if (place_.is_cuda()) {
    p.group(place_);
    // What a CUDA graph of the block must see unchanged, and whether one may be made of it at all: not with
    // control flow, nor with an op whose OpDef says a replay would not repeat its run (OpDef::replayable).
    std::set<const Value*> seen;
    for (const PreparedBlock::Step& st : p.steps_) {
      const Operator& op = *st.op;
      const OpDef& d = op_def(op.type());
      if (op.sub_block() >= 0 || (d.replayable && !d.replayable(op))) p.graph_.off = true;
      for (const auto& names : {op.input_names(), op.output_names()})
        for (const std::string& n : names)
          // SelectedRows too: the run-time check turns graphs off for them (their rows are host data).
          if (const Value* v = p.local_->find(n); v && (v->is_tensor() || v->is_selected_rows()) && seen.insert(v).second) p.graph_.values.push_back(v);
    }
  }
}

}  // namespace oar
