// oar/runtime/control_flow-inl.hpp: the ops the executor runs itself (part of its implementation, included by
// executor-inl.hpp): conditional_block, while and their gradients; recurrent's are in recurrent-inl.hpp.
#pragma once
#include "oar/runtime/executor.hpp"

#include "oar/ops/control_flow.hpp"
#include "oar/runtime/step_values.hpp"

namespace oar {

OAR_FUNC void Executor::run_control(PreparedBlock& p, PreparedBlock::Step& s, int index) {
  try {
    switch (s.run_by) {
      case RunBy::conditional: return run_conditional(p, s, false);
      case RunBy::conditional_grad: return run_conditional(p, s, true);
      case RunBy::recurrent: return run_recurrent(p, s);
      case RunBy::recurrent_grad: return run_recurrent_grad(p, s);
      case RunBy::while_loop: return run_while(p, s);
      case RunBy::while_grad: return run_while_grad(p, s);
      case RunBy::kernel: case RunBy::feed: case RunBy::fetch: return;
    }
  } catch (Error& e) {
    e.add_context(fmt::format("while running op #{} '{}' of block {}", index, s.op->type(), p.block_), s.op->origin());
    throw;
  }
}

OAR_FUNC void Executor::run_conditional(PreparedBlock& p, PreparedBlock::Step& s, bool grad) {
  using Op = ops::ConditionalBlock;
  const KernelContext& c = s.ctx;
  bool go = true;
  if (s.op->attr(Op::is_scalar_condition)) {
    const LoDTensor& cond = c.in(Op::cond);
    c.check(cond.dtype() == DType::boolean && cond.numel() == 1, "Cond must be one bool, got {} {}", oar::name(cond.dtype()), cond.shape());
    if (cond.place().is_cpu()) go = cond.data<bool>()[0];
    else go = cond.to(cpu()).data<bool>()[0];  // a device's condition: the host waits for it (the branch is chosen here)
  } else {
    for (size_t k = 0; k < c.num_in(Op::cond); ++k) go = go && c.in(Op::cond, k).numel() > 0;
  }
  if (grad) return run_conditional_grad(p, s, go);
  if (!go) return;
  if (!s.sub) s.sub = prepare(p.program_, *p.local_, s.op->sub_block(), p.options_);
  // The scope the sub-block ran in, for conditional_block_grad (one pointer: no allocation after the first run).
  if (c.has_out(Op::scope)) {
    Value::ScopeList& scopes = c.out_value(Op::scope)->scopes();
    scopes.resize(1);
    scopes[0] = s.sub->local_;
  }
  run(*s.sub, *p.local_);
}

OAR_FUNC void Executor::run_conditional_grad(PreparedBlock& p, PreparedBlock::Step& s, bool ran) {
  using G = ops::ConditionalBlockGrad;
  const KernelContext& c = s.ctx;
  const Operator& op = *s.op;
  if (!s.loop) {  // the names of the seeds and of the inputs' gradients, made once (no allocation per run)
    s.loop = std::make_shared<PreparedBlock::Loop>();
    for (auto& n : op.input(G::out)) s.loop->output_seeds.push_back(grad_var_name(n));
    for (auto& n : op.input(G::input)) s.loop->parameter_grads.push_back(grad_var_name(n));
  }
  if (ran) {
    Value::ScopeList& scopes = c.in_value(G::scope)->scopes();
    c.check(scopes.size() == 1, "the forward conditional_block has not run: run the forward pass first");
    // The grad block lives in a child of the forward's scope, where its ops find the forward's activations;
    // prepared once, again only if the forward's scope changed.
    if (!s.sub || s.sub->scope_ != scopes[0]) s.sub = prepare(p.program_, *scopes[0], op.sub_block(), p.options_);
    const std::vector<std::string>& seeds = s.loop->output_seeds;
    for (size_t k = 0; k < seeds.size(); ++k) {  // the seeds: the outputs' gradients, shared
      Value* seed = s.sub->local_->find_local(seeds[k]);
      const Value* g = k < c.num_in(G::out_grad) ? c.in_value(G::out_grad, k) : nullptr;
      if (!seed) continue;
      if (g && !g->empty()) *seed = *g;
      else {
        const Value* o = c.in_value(G::out, k);
        c.check(o != nullptr, "Out@GRAD {} has no Out", k);
        detail::zero_like(c, *seed, *o);
      }
    }
    run_steps(*s.sub, {}, 1);
    for (auto& n : seeds)  // let go of the shared storage, which the writer of Out@GRAD reuses next run
      if (Value* seed = s.sub->local_->find_local(n); seed && seed->tensor_if()) seed->tensor_if()->release_storage();
  }
  const std::vector<std::string>& inputs = op.input(G::input);
  for (size_t i = 0; i < c.num_out(G::input_grad); ++i) {
    if (!c.has_out(G::input_grad, i)) continue;
    const Value* v = ran ? s.sub->local_->find_local(s.loop->parameter_grads[i]) : nullptr;
    Value* gv = c.out_value(G::input_grad, i);
    if (v && v->is_selected_rows()) {  // sparse rows (an embedding's): passed on as they are
      *gv = *v;
      continue;
    }
    if (gv->is_selected_rows()) gv->reset();
    const LoDTensor& x = c.in(G::input, i);
    LoDTensor& gx = c.out(G::input_grad, i);
    if (v && v->tensor_if() && v->tensor_if()->initialized()) {
      const LoDTensor& src = *v->tensor_if();
      c.check(src.numel() == x.numel(), "the gradient of '{}' is {} inside the block, but '{}' is {}", inputs[i], src.shape(), inputs[i], x.shape());
      gx.copy_from(src);
    } else {
      // Not run, or not reached inside the block: a zero gradient (see ops::ConditionalBlockGrad).
      gx.resize(x.shape(), x.dtype());
      detail::zero(c, gx);
    }
    gx.set_lod(x.lod());
  }
}

OAR_FUNC void Executor::run_while(PreparedBlock& p, PreparedBlock::Step& s) {
  using W = ops::While;
  const KernelContext& c = s.ctx;
  const Operator& op = *s.op;
  if (!s.loop) {
    s.loop = std::make_shared<PreparedBlock::Loop>();
    s.loop->block = op.sub_block();
    s.loop->ex_states = op.attr(W::ex_states), s.loop->states = op.attr(W::states), s.loop->condition = op.attr(W::next_condition);
  }
  PreparedBlock::Loop& L = *s.loop;
  const int64_t max_it = op.attr(W::max_iterations);
  auto truth = [&](const Value* v, const std::string& what) {
    c.check(v && v->tensor_if() && v->tensor_if()->initialized(), "the condition '{}' has no value", what);
    const LoDTensor& t = *v->tensor_if();
    c.check(t.dtype() == DType::boolean && t.numel() == 1, "the condition '{}' must be one bool, got {} {}", what, oar::name(t.dtype()), t.shape());
    if (t.place().is_cpu()) return t.data<bool>()[0];
    return t.to(cpu()).data<bool>()[0];  // a device's condition: the host waits for it (the loop is driven here)
  };
  bool go = truth(c.in_value(W::condition), c.in_name(W::condition));
  Value::ScopeList& scopes = c.out_value(W::step_scopes)->scopes();
  scopes.clear();
  const size_t m_count = L.ex_states.size();
  std::vector<const Value*>& cur = L.current;
  cur.resize(m_count);
  for (size_t m = 0; m < m_count; ++m) {
    cur[m] = c.in_value(W::init_states, m);
    c.check(cur[m] && !cur[m]->empty(), "loop variable '{}' has no initial value", c.in_name(W::init_states, m));
  }
  int64_t t = 0;
  for (; go; ++t) {
    c.check(t < max_it, "the loop ran {} steps and its condition still holds (max_iterations; the body must make '{}' false)", t, L.condition);
    if (int64_t(L.steps.size()) <= t)
      L.steps.push_back(L.steps.empty() ? prepare(p.program_, *p.local_, L.block, p.options_) : prepare_like(*L.steps[0], *p.local_));
    PreparedBlock& step = *L.steps[size_t(t)];
    Scope& sc = *step.local_;
    scopes.push_back(&sc);
    for (size_t m = 0; m < m_count; ++m) {
      Value* ex = sc.find_local(L.ex_states[m]);
      c.check(ex != nullptr, "the body has no variable '{}'", L.ex_states[m]);
      // A previous step's state is shared (the body only reads it); the initial value is copied, so that its
      // writer outside the loop keeps its storage to itself.
      if (t == 0) detail::copy_value(*ex, *cur[m]);
      else if (ex != cur[m]) *ex = *cur[m];
      // The next step's view of this step's state, from the last run, lets go of it, so that this step
      // writes its state into the same storage again.
      if (size_t(t) + 1 < L.steps.size())
        if (Value* nx = L.steps[size_t(t) + 1]->local_->find_local(L.ex_states[m]); nx && nx->tensor_if()) nx->tensor_if()->release_storage();
    }
    run_steps(step, {}, 1);
    for (size_t m = 0; m < m_count; ++m) {
      cur[m] = sc.find(L.states[m]);
      c.check(cur[m] && !cur[m]->empty(), "loop variable '{}' has no value after step {}", L.states[m], t);
    }
    go = truth(sc.find(L.condition), L.condition);
  }
  for (size_t m = 0; m < m_count; ++m)
    if (c.has_out(W::final_states, m)) detail::copy_value(*c.out_value(W::final_states, m), *cur[m]);
}

OAR_FUNC void Executor::run_while_grad(PreparedBlock& p, PreparedBlock::Step& s) {
  using G = ops::WhileGrad;
  const KernelContext& c = s.ctx;
  const Operator& op = *s.op;
  if (!s.loop) {
    s.loop = std::make_shared<PreparedBlock::Loop>();
    auto& L = *s.loop;
    L.block = op.sub_block();
    L.states = op.attr(G::states), L.state_seeds = op.attr(G::state_seeds), L.output_seeds = op.attr(G::out_seeds);
    for (auto& n : op.attr(G::ex_states)) L.ex_states.push_back(grad_var_name(n));
    for (auto& n : op.input(G::x)) L.parameter_grads.push_back(grad_var_name(n));
  }
  PreparedBlock::Loop& L = *s.loop;
  Value::ScopeList& scopes = c.in_value(G::step_scopes)->scopes();
  const int64_t steps = int64_t(scopes.size());
  for (int64_t t = 0; t < steps; ++t) {
    if (int64_t(L.steps.size()) <= t) L.steps.push_back(nullptr);
    auto& g = L.steps[size_t(t)];
    if (!g || g->scope_ != scopes[size_t(t)]) g = L.steps[0] && t > 0 ? prepare_like(*L.steps[0], *scopes[size_t(t)]) : prepare(p.program_, *scopes[size_t(t)], L.block, p.options_);
  }
  const std::vector<std::string>& xs = op.input(G::x);
  for (size_t i = 0; i < c.num_out(G::x_grad); ++i) {
    if (!c.has_out(G::x_grad, i)) continue;
    detail::reset_sum(c, *c.out_value(G::x_grad, i));
  }
  const size_t m_count = L.states.size();
  for (int64_t t = steps - 1; t >= 0; --t) {
    PreparedBlock& gp = *L.steps[size_t(t)];
    Scope& gs = *gp.local_;
    for (size_t m = 0; m < m_count; ++m) {  // the gradient of the state this step hands on
      if (L.state_seeds[m] == kEmptyVarName) continue;
      Value* seed = gs.find_local(L.state_seeds[m]);
      c.check(seed != nullptr, "the grad block has no variable '{}'", L.state_seeds[m]);
      const Value* from = nullptr;
      if (t == steps - 1) from = c.in_value(G::final_states_grad, m);
      else from = L.steps[size_t(t + 1)]->local_->find_local(L.ex_states[m]);
      if (from && !from->empty() && (!from->tensor_if() || from->tensor_if()->initialized())) {
        detail::copy_value(*seed, *from);
      } else {
        const Value* st = scopes[size_t(t)]->find(L.states[m]);
        c.check(st != nullptr, "no value of '{}' at step {}", L.states[m], t);
        detail::zero_like(c, *seed, *st);
      }
    }
    for (size_t j = 0; j < L.output_seeds.size(); ++j) {  // the gradients of the arrays the body writes, shared
      Value* seed = gs.find_local(L.output_seeds[j]);
      const Value* g = c.in_value(G::out_grad, j);
      c.check(seed != nullptr, "the grad block has no variable '{}'", L.output_seeds[j]);
      if (g && !g->empty()) *seed = *g;
      else seed->reset();
    }
    run_steps(gp, {}, 1);
    for (size_t i = 0; i < xs.size(); ++i) {  // an outer input's gradient is the sum over the steps
      if (!c.has_out(G::x_grad, i)) continue;
      const Value* v = gs.find_local(L.parameter_grads[i]);
      if (!v || v->empty()) continue;
      detail::accumulate(c, *c.out_value(G::x_grad, i), *v, xs[i]);
    }
  }
  for (size_t i = 0; i < xs.size(); ++i) {  // not reached at any step: zeros
    if (!c.has_out(G::x_grad, i)) continue;
    Value* gx = c.out_value(G::x_grad, i);
    const bool none = gx->is_list() ? false : detail::holds_nothing(*gx) && !(gx->tensor_if() && c.in_value(G::x, i)->tensor_if() && c.in(G::x, i).numel() == 0);
    if (none) detail::zero_like(c, *gx, *c.in_value(G::x, i));
    else if (gx->is_list() && c.in_value(G::x, i)->is_list()) gx->list().resize(std::max(gx->list().size(), c.in_value(G::x, i)->list().size()));
  }
  for (size_t m = 0; m < m_count; ++m) {  // the initial values' gradients: the loop variables' at step 0
    if (!c.has_out(G::init_states_grad, m)) continue;
    Value* gi = c.out_value(G::init_states_grad, m);
    const Value* from = steps > 0 ? L.steps[0]->local_->find_local(L.ex_states[m]) : c.in_value(G::final_states_grad, m);
    if (from && !from->empty() && (!from->tensor_if() || from->tensor_if()->initialized())) detail::copy_value(*gi, *from);
    else detail::zero_like(c, *gi, *c.in_value(G::init_states, m));
  }
}

}  // namespace oar
