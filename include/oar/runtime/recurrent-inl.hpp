// oar/runtime/recurrent-inl.hpp: recurrent and recurrent_grad, run by the executor itself (part of its
// implementation, included by executor-inl.hpp): the step block once per time step over the batch's
// sequences, longest first, each step in its own kept scope.
#pragma once
#include "oar/runtime/executor.hpp"

#include "oar/ops/recurrent.hpp"
#include "oar/runtime/step_values.hpp"

namespace oar {

namespace detail {

/// The batch layout of a recurrent op's sequences (the last LoD level of `x`): each sequence's first row, the
/// sequences ordered longest first (ties in LoD order, as a stable sort gives), k_t, the number of them longer
/// than t, for every step t, and `step_rows`: the rows of step t's k_t sequences in x, step after step, then
/// `order` again (the row lists the step copies read). No allocation once the vectors have grown to the batch.
inline void recurrent_layout(const KernelContext& c, const LoDTensor& x, std::vector<int64_t>& start, std::vector<int64_t>& order, std::vector<int64_t>& active,
                             std::vector<int64_t>& step_rows) {
  c.check(x.lod_level() >= 1, "input '{}' has no LoD: a recurrent op steps over sequences", c.in_name(ops::Recurrent::inputs));
  const auto& off = x.lod().back();
  const size_t n = off.size() - 1;
  start.resize(n);
  order.resize(n);
  for (size_t i = 0; i < n; ++i) start[i] = int64_t(off[i]), order[i] = int64_t(i);
  auto len = [&](int64_t s) { return int64_t(off[size_t(s) + 1] - off[size_t(s)]); };
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return len(a) != len(b) ? len(a) > len(b) : a < b; });
  const int64_t steps = n ? len(order[0]) : 0;
  active.resize(size_t(steps));
  int64_t k = int64_t(n);
  for (int64_t t = 0; t < steps; ++t) {
    while (k > 0 && len(order[size_t(k - 1)]) <= t) --k;
    active[size_t(t)] = k;
  }
  step_rows.clear();
  for (int64_t t = 0; t < steps; ++t)
    for (int64_t r = 0; r < active[size_t(t)]; ++r) step_rows.push_back(start[size_t(order[size_t(r)])] + t);
  step_rows.insert(step_rows.end(), order.begin(), order.end());
}

/// The row lists where the kernel's place reads them: `rows` itself on the CPU; on a GPU a copy in the device's
/// memory (`device` keeps it), uploaded once per run so that each step's row moves are one kernel.
inline const int64_t* rows_on_place(const KernelContext& c, const std::vector<int64_t>& rows, Tensor& device) {
  if (!c.place().is_cuda()) return rows.data();
  if (rows.empty()) return nullptr;
  device = Tensor(Shape{int64_t(rows.size())}, DType::i64, c.place());
  oar::detail::cuda_upload(c.cuda(), device.raw(), rows.data(), device.bytes());  // queued: the host goes on
  return device.data<int64_t>();
}

}  // namespace detail

OAR_FUNC std::shared_ptr<PreparedBlock::Loop> Executor::make_loop(const KernelContext& c) const {
  using R = ops::Recurrent;
  const Operator& op = c.op();
  auto L = std::make_shared<PreparedBlock::Loop>();
  L->block = op.sub_block();
  L->step_inputs = op.attr(R::step_inputs), L->step_outputs = op.attr(R::step_outputs);
  L->ex_states = op.attr(R::ex_states), L->states = op.attr(R::states), L->boot_states = op.attr(R::boot_states);
  return L;
}

OAR_FUNC void Executor::run_recurrent(PreparedBlock& p, PreparedBlock::Step& s) {
  using R = ops::Recurrent;
  const KernelContext& c = s.ctx;
  if (!s.loop) s.loop = make_loop(c);
  PreparedBlock::Loop& L = *s.loop;
  const LoDTensor& x0 = c.in(R::inputs, 0);
  detail::recurrent_layout(c, x0, L.start, L.order, L.active, L.step_rows);
  const int64_t* rows = detail::rows_on_place(c, L.step_rows, L.step_rows_device);
  for (size_t i = 1; i < c.num_in(R::inputs); ++i) {
    const LoDTensor& xi = c.in(R::inputs, i);
    c.check(xi.lod_level() >= 1 && xi.lod().back() == x0.lod().back(), "input '{}' must have the LoD of '{}'", c.in_name(R::inputs, i), c.in_name(R::inputs, 0));
  }
  const int64_t steps = int64_t(L.active.size());
  while (int64_t(L.steps.size()) < steps)
    L.steps.push_back(L.steps.empty() ? prepare(p.program_, *p.local_, L.block, p.options_) : prepare_like(*L.steps[0], *p.local_));
  Value::ScopeList& scopes = c.out_value(R::step_scopes)->scopes();
  scopes.resize(size_t(steps));
  for (int64_t t = 0; t < steps; ++t) scopes[size_t(t)] = L.steps[size_t(t)]->local_;

  const Block& sb = p.program_->block(L.block);
  const int64_t* order_rows = rows ? rows + (int64_t(L.step_rows.size()) - int64_t(L.order.size())) : nullptr;
  const int64_t* step_rows = rows;  // step t's rows in the sequences
  for (int64_t t = 0; t < steps; step_rows += L.active[size_t(t)], ++t) {
    PreparedBlock& step = *L.steps[size_t(t)];
    Scope& sc = *step.local_;
    const int64_t k = L.active[size_t(t)];
    for (size_t i = 0; i < L.step_inputs.size(); ++i) {  // x_t: row t of each running sequence
      const LoDTensor& x = c.in(R::inputs, i);
      LoDTensor& xt = detail::step_tensor(c, sc, L.step_inputs[i]);
      detail::resize_rows(c, xt, x.shape(), x.dtype(), k);
      detail::move_rows(c, xt.raw(), x.raw(), xt.bytes() / size_t(k), k, nullptr, step_rows);
    }
    for (size_t m = 0; m < L.ex_states.size(); ++m) {  // the memories: the state of step t-1, or the boot
      LoDTensor& pre = detail::step_tensor(c, sc, L.ex_states[m]);
      if (t > 0) {
        const LoDTensor& prev = detail::step_tensor(c, *L.steps[size_t(t - 1)]->local_, L.states[m]);
        detail::resize_rows(c, pre, prev.shape(), prev.dtype(), k);
        detail::copy_bytes(c, pre.raw(), prev.raw(), pre.bytes());
      } else if (int32_t b = L.boot_states[m]; b >= 0) {
        const LoDTensor& boot = c.in(R::initial_states, size_t(b));
        c.check(boot.rank() >= 1 && boot.dim(0) == int64_t(L.order.size()), "boot '{}' has {} rows for {} sequences", c.in_name(R::initial_states, size_t(b)),
                boot.rank() ? boot.dim(0) : 0, L.order.size());
        detail::resize_rows(c, pre, boot.shape(), boot.dtype(), k);
        detail::move_rows(c, pre.raw(), boot.raw(), k ? pre.bytes() / size_t(k) : 0, k, nullptr, order_rows);
      } else {
        const Variable& v = sb.var(L.ex_states[m]);
        detail::resize_rows(c, pre, v.shape(), v.dtype(), k);
        detail::zero(c, pre);
      }
    }
    run_steps(step, {}, 1);
    for (size_t j = 0; j < L.step_outputs.size(); ++j) {  // the step's rows go back to their sequences
      const LoDTensor& y = detail::step_tensor(c, sc, L.step_outputs[j]);
      c.check(y.initialized() && y.rank() >= 1 && y.dim(0) == k, "step output '{}' must have one row per running sequence ({}) at step {}, got {}",
              L.step_outputs[j], k, t, y.shape());
      LoDTensor& out = c.out(R::outputs, j);
      if (t == 0) {
        detail::resize_rows(c, out, y.shape(), y.dtype(), x0.dim(0));
        out.set_lod(x0.lod());
      }
      const size_t rb = y.bytes() / size_t(k);
      c.check(out.bytes() == rb * size_t(x0.dim(0)) && out.dtype() == y.dtype(), "step output '{}' changed shape between steps: {} at step {}", L.step_outputs[j],
              y.shape(), t);
      detail::move_rows(c, out.raw(), y.raw(), rb, k, step_rows, nullptr);
    }
  }
  if (steps == 0)  // no step ran (no sequence, or only empty ones): the outputs have no rows
    for (size_t j = 0; j < L.step_outputs.size(); ++j) {
      const Variable& v = sb.var(L.step_outputs[j]);
      Shape sh = v.shape();
      for (auto& d : sh) d = std::max<int64_t>(d, 0);
      LoDTensor& out = c.out(R::outputs, j);
      detail::resize_rows(c, out, sh, v.dtype(), x0.dim(0));
      out.set_lod(x0.lod());
    }
}

OAR_FUNC void Executor::run_recurrent_grad(PreparedBlock& p, PreparedBlock::Step& s) {
  using G = ops::RecurrentGrad;
  const KernelContext& c = s.ctx;
  const Operator& op = *s.op;
  if (!s.loop) {
    s.loop = make_loop(c);
    auto& L = *s.loop;
    L.output_seeds = op.attr(G::output_seeds), L.state_seeds = op.attr(G::state_seeds);
    // From here on the names are those of gradients in the grad block.
    for (auto& n : L.step_inputs) n = grad_var_name(n);
    for (auto& n : L.ex_states) n = grad_var_name(n);
    for (auto& n : op.input(G::parameters)) L.parameter_grads.push_back(grad_var_name(n));
  }
  PreparedBlock::Loop& L = *s.loop;
  const LoDTensor& x0 = c.in(G::inputs, 0);
  detail::recurrent_layout(c, x0, L.start, L.order, L.active, L.step_rows);
  const int64_t* rows = detail::rows_on_place(c, L.step_rows, L.step_rows_device);
  const int64_t steps = int64_t(L.active.size());
  Value::ScopeList& scopes = c.in_value(G::step_scopes)->scopes();
  c.check(int64_t(scopes.size()) == steps, "the forward recurrent op ran {} steps, but the inputs have {}: run the forward pass first", scopes.size(), steps);
  for (int64_t t = 0; t < steps; ++t) {
    if (int64_t(L.steps.size()) <= t) L.steps.push_back(nullptr);
    auto& g = L.steps[size_t(t)];
    if (!g || g->scope_ != scopes[size_t(t)]) g = L.steps[0] && t > 0 ? prepare_like(*L.steps[0], *scopes[size_t(t)]) : prepare(p.program_, *scopes[size_t(t)], L.block, p.options_);
  }
  // The outer gradients start at zero; the steps fill or add to them.
  for (size_t i = 0; i < c.num_out(G::inputs_grad); ++i)
    if (c.has_out(G::inputs_grad, i)) {
      const LoDTensor& x = c.in(G::inputs, i);
      LoDTensor& gx = c.out(G::inputs_grad, i);
      gx.resize(x.shape(), x.dtype());
      gx.set_lod(x.lod());
      detail::zero(c, gx);
    }
  for (size_t i = 0; i < c.num_out(G::initial_states_grad); ++i)
    if (c.has_out(G::initial_states_grad, i)) {
      const LoDTensor& v = c.in(G::initial_states, i);
      LoDTensor& gv = c.out(G::initial_states_grad, i);
      gv.resize(v.shape(), v.dtype());
      detail::zero(c, gv);
    }
  for (size_t i = 0; i < c.num_out(G::parameters_grad); ++i)  // the steps add into them (dense or sparse rows)
    if (c.has_out(G::parameters_grad, i)) detail::reset_sum(c, *c.out_value(G::parameters_grad, i));
  const std::vector<std::string>& params = op.input(G::parameters);
  int64_t step_begin = int64_t(L.step_rows.size() - L.order.size());  // past the last step's rows in step_rows
  for (int64_t t = steps - 1; t >= 0; --t) {
    PreparedBlock& gp = *L.steps[size_t(t)];
    Scope& gs = *gp.local_;
    const int64_t k = L.active[size_t(t)];
    const int64_t k_next = t + 1 < steps ? L.active[size_t(t + 1)] : 0;
    step_begin -= k;
    const int64_t* step_rows = rows ? rows + step_begin : nullptr;  // step t's rows in the sequences
    for (size_t j = 0; j < L.output_seeds.size(); ++j) {  // the gradient of the step's output rows
      const LoDTensor& gy = c.in(G::outputs_grad, j);
      LoDTensor& seed = detail::step_tensor(c, gs, L.output_seeds[j]);
      detail::resize_rows(c, seed, gy.shape(), gy.dtype(), k);
      detail::move_rows(c, seed.raw(), gy.raw(), seed.bytes() / size_t(k), k, nullptr, step_rows);
    }
    for (size_t m = 0; m < L.state_seeds.size(); ++m) {  // plus the memory's gradient from step t+1
      LoDTensor& seed = detail::step_tensor(c, gs, L.state_seeds[m]);
      if (std::find(L.output_seeds.begin(), L.output_seeds.end(), L.state_seeds[m]) == L.output_seeds.end() &&
          std::find(L.state_seeds.begin(), L.state_seeds.begin() + ptrdiff_t(m), L.state_seeds[m]) == L.state_seeds.begin() + ptrdiff_t(m)) {
        const LoDTensor& st = detail::step_tensor(c, *scopes[size_t(t)], L.states[m]);
        detail::resize_rows(c, seed, st.shape(), st.dtype(), k);
        detail::zero(c, seed);
      }
      if (k_next == 0) continue;
      const Value* pv = L.steps[size_t(t + 1)]->local_->find_local(L.ex_states[m]);
      if (pv && pv->tensor_if() && pv->tensor_if()->initialized()) {
        const LoDTensor& g_pre = *pv->tensor_if();
        c.check(g_pre.rank() >= 1 && g_pre.dim(0) == k_next && g_pre.numel() / k_next == seed.numel() / k, "the gradient of memory '{}' is {} at step {}",
                L.ex_states[m], g_pre.shape(), t + 1);
        detail::add_elements(c, seed, g_pre, g_pre.numel());
      }
    }
    run_steps(gp, {}, 1);
    for (size_t i = 0; i < L.step_inputs.size(); ++i) {
      if (!c.has_out(G::inputs_grad, i)) continue;
      const Value* v = gs.find_local(L.step_inputs[i]);
      if (!v || !v->tensor_if() || !v->tensor_if()->initialized()) continue;  // x does not reach the outputs
      const LoDTensor& gxt = *v->tensor_if();
      LoDTensor& gx = c.out(G::inputs_grad, i);
      c.check(gxt.rank() >= 1 && gxt.dim(0) == k && gxt.bytes() / size_t(k) * size_t(gx.dim(0)) == gx.bytes(), "the gradient of step input '{}' is {}",
              L.step_inputs[i], gxt.shape());
      detail::move_rows(c, gx.raw(), gxt.raw(), gxt.bytes() / size_t(k), k, step_rows, nullptr);
    }
    for (size_t i = 0; i < params.size(); ++i) {  // a parameter's gradient is the sum over the steps
      if (!c.has_out(G::parameters_grad, i)) continue;
      const Value* v = gs.find_local(L.parameter_grads[i]);
      if (!v || v->empty()) continue;
      c.check(!v->tensor_if() || !v->tensor_if()->initialized() || v->tensor_if()->numel() == c.in(G::parameters, i).numel(),
              "the gradient of '{}' is {} inside the step", params[i], v->tensor_if() ? v->tensor_if()->shape() : Shape{});
      detail::accumulate(c, *c.out_value(G::parameters_grad, i), *v, params[i]);
    }
    if (t == 0)
      for (size_t m = 0; m < L.ex_states.size(); ++m) {  // the boot's gradient: the memories' at step 0
        const int32_t b = L.boot_states[m];
        if (b < 0 || !c.has_out(G::initial_states_grad, size_t(b))) continue;
        const Value* v = gs.find_local(L.ex_states[m]);
        if (!v || !v->tensor_if() || !v->tensor_if()->initialized()) continue;
        const LoDTensor& gpre = *v->tensor_if();
        LoDTensor& gb = c.out(G::initial_states_grad, size_t(b));
        const size_t rb = gpre.bytes() / size_t(k);
        c.check(rb * size_t(gb.dim(0)) == gb.bytes(), "the gradient of memory '{}' is {}", L.ex_states[m], gpre.shape());
        // gb[order[r]] += gpre[r]: each boot row is some sequence's and receives once.
        const int64_t w = gb.dim(0) ? gb.numel() / gb.dim(0) : 0;
        for (int64_t r = 0; r < k; ++r) detail::add_elements(c, gb, gpre, w, L.order[size_t(r)] * w, r * w);
      }
  }
  for (size_t i = 0; i < params.size(); ++i)  // not reached at any step: zeros
    if (c.has_out(G::parameters_grad, i) && detail::holds_nothing(*c.out_value(G::parameters_grad, i)))
      detail::zero_like(c, *c.out_value(G::parameters_grad, i), *c.in_value(G::parameters, i));
}

}  // namespace oar
