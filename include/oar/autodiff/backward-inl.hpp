// oar/autodiff/backward-inl.hpp: the implementation of backward.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/autodiff/backward.hpp"

#include <algorithm>
#include <map>

#include "oar/ops/control_flow.hpp"
#include "oar/ops/fill_constant.hpp"
#include "oar/ops/fill_zeros_like.hpp"
#include "oar/ops/recurrent.hpp"
#include "oar/ops/registry.hpp"
#include "oar/ops/sum.hpp"

namespace oar {

namespace detail {

inline bool is_grad_name(const std::string& n) { return n.find("@GRAD") != std::string::npos; }
/// "x@GRAD@RENAME@1" -> "x"
inline std::string forward_name(const std::string& g) { return g.substr(0, g.find("@GRAD")); }
/// The kind of the gradient of `fw` as autodiff declares it: an array for a tensor array (read_from_array_grad
/// and sum write arrays there), a tensor otherwise (a sparse gradient is its grad op's to make).
inline VarKind grad_kind(const Variable& fw) { return fw.kind() == VarKind::lod_tensor_array ? VarKind::lod_tensor_array : VarKind::lod_tensor; }

/// Fluid's _addup_repetitive_outputs_: a gradient written by several grad ops is renamed per writer
/// (`@RENAME@k`) and summed right before its first reader (or at the end).
inline std::vector<Operator> add_up_repeated_grads(std::vector<Operator> ops) {
  std::vector<Operator> out;
  std::map<std::string, std::vector<std::string>> pending;  // grad -> its unsummed partial names
  std::map<std::string, std::pair<size_t, int>> writers;    // grad -> (index of the op writing the plain name, writes so far)
  auto flush = [&](const std::string& g) {
    auto it = pending.find(g);
    if (it == pending.end() || it->second.size() < 2) return;
    Operator sum{std::string(ops::Sum::type)};
    sum.set_input(ops::Sum::x, it->second).set_output(ops::Sum::out, {g});
    out.push_back(std::move(sum));
    writers[g].first = out.size() - 1;
    it->second = {g};
  };
  for (auto& op : ops) {
    for (auto& n : op.input_names())
      if (is_grad_name(n)) flush(n);
    // First writes of a grad by this very op (an op using one variable in two input slots, e.g.
    // elementwise_mul(x, x), writes x@GRAD twice): renamed here, as the op is not in `out` yet.
    std::map<std::string, std::string*> first_here;
    for (auto& s : op.mutable_outputs())
      for (auto& n : s.args) {
        if (n == kEmptyVarName || !is_grad_name(n)) continue;
        const std::string g = n;
        auto w = writers.find(g);
        if (w == writers.end()) {
          writers[g] = {out.size(), 0};
          pending[g] = {g};
          first_here[g] = &n;
          continue;
        }
        auto& parts = pending[g];
        if (parts.size() == 1 && parts[0] == g) {
          std::string first = g + "@RENAME@" + std::to_string(w->second.second++);
          if (w->second.first == out.size()) *first_here.at(g) = first;
          else out[w->second.first].rename_output(g, first);
          parts = {first};
        }
        std::string renamed = g + "@RENAME@" + std::to_string(w->second.second++);
        parts.push_back(renamed);
        n = renamed;
      }
    out.push_back(std::move(op));
  }
  std::vector<std::string> rest;
  for (auto& [g, parts] : pending) rest.push_back(g);
  for (auto& g : rest) flush(g);
  return out;
}

/// A sub-block's grad block, as append_backward builds the global block's: the grad makers of the ops on the
/// path from `seeds` (variables of `sb` whose gradients come from outside it) in reverse, repeated gradients
/// summed, missing ones zero. Its parent is `sb`, so the grad ops read the forward's variables by scope lookup.
/// `seed_names[k]` is where the gradient of `seeds[k]` is to be written (declared in the grad block; the op that
/// runs it writes the outside gradient there): `seeds[k]@GRAD`, or a renamed part when the block's own grad ops
/// also write that gradient. `owner` names the op for errors.
struct SubGradBlock {
  int block = -1;
  std::vector<std::string> seed_names;
};
std::vector<Operator> grad_ops_of(Program& program, const Operator& op, const Block& b, const std::set<std::string>& ng);
inline SubGradBlock build_sub_grad_block(Program& program, const Block& sb, const std::vector<std::string>& seeds, const std::set<std::string>& ng,
                                         std::string_view owner) {
  std::set<std::string> needed(seeds.begin(), seeds.end());
  std::vector<size_t> path;
  for (size_t i = sb.num_ops(); i-- > 0;) {
    const Operator& f = sb.op(i);
    bool on = false;
    for (auto& n : f.output_names()) on = on || needed.count(n);
    if (!on) continue;
    path.push_back(i);
    for (auto& n : f.input_names())
      if (!ng.count(n)) needed.insert(n);
  }

  // One stand-in writer per seed comes first, so that a seed the block's own grad ops also write is summed with
  // them like any repeated gradient; the stand-ins are dropped, and their (possibly renamed) outputs are where
  // the op writes the outside gradients.
  std::vector<Operator> grads;
  for (auto& n : seeds) {
    Operator stand_in{"@SEED@"};
    stand_in.set_output("Out", {grad_var_name(n)});
    grads.push_back(std::move(stand_in));
  }
  for (size_t i : path) {
    const Operator& f = sb.op(i);
    bool wants_any = false;
    for (auto& n : f.input_names()) wants_any = wants_any || (needed.count(n) && !ng.count(n));
    if (!wants_any) continue;
    const OpDef& d = op_def(f.type());
    if (!d.grad && f.sub_block() < 0)
      throw Error(fmt::format("append_backward: op '{}' has no gradient, but the outputs of {} depend on its inputs {}", f.type(), owner,
                              fmt::join(f.input_names(), ", ")),
                  f.origin());
    std::set<std::string> ngi = ng;
    for (auto& n : f.input_names())
      if (!needed.count(n)) ngi.insert(n);
    for (auto& g : grad_ops_of(program, f, sb, ngi)) {
      if (g.origin().line == 0) g.set_origin(f.origin());
      grads.push_back(std::move(g));
    }
  }
  grads = add_up_repeated_grads(std::move(grads));
  SubGradBlock out;
  for (size_t k = 0; k < seeds.size(); ++k) out.seed_names.push_back(grads[k].output("Out").at(0));
  grads.erase(grads.begin(), grads.begin() + ptrdiff_t(seeds.size()));

  const int current = program.current_block().idx();
  Block& gb = program.create_block(sb.idx());  // its parent is the forward block: the grad ops read its variables
  gb.set_forward_block_idx(sb.idx());
  program.set_current_block(current);
  out.block = gb.idx();
  auto declare = [&](const std::string& n) {
    if (n == kEmptyVarName || gb.has_var(n)) return;
    const Variable* fw = sb.find_var(forward_name(n));
    VarSpec spec;
    if (fw) spec = {.dtype = fw->dtype(), .shape = fw->shape(), .lod_level = fw->lod_level(), .kind = grad_kind(*fw)};
    gb.create_var(n, spec);
  };
  std::set<std::string> produced(out.seed_names.begin(), out.seed_names.end());
  for (auto& n : out.seed_names) declare(n);
  std::vector<Operator> final_ops;
  for (auto& g : grads) {
    for (auto& n : g.input_names())
      if (is_grad_name(n) && !produced.count(n)) {
        using Z = ops::FillZerosLike;
        Operator z{std::string(Z::type)};
        z.set_input(Z::x, {forward_name(n)}).set_output(Z::out, {n});
        final_ops.push_back(std::move(z));
        produced.insert(n);
      }
    for (auto& n : g.output_names()) produced.insert(n);
    final_ops.push_back(std::move(g));
  }
  for (auto& g : final_ops) {
    for (auto& n : g.output_names()) declare(n);
    add_op(gb, std::move(g));
  }
  return out;
}

/// What a control-flow op's grad block leaves without gradients: `no_grad`, the sub-block's stop_gradient and
/// non-float variables, and of `outer` (the outer variables the op reads) those the sub-block sees as such or as
/// frozen parameters.
inline std::set<std::string> sub_block_no_grad(const Block& sb, const std::set<std::string>& no_grad, const std::vector<std::string>& outer) {
  std::set<std::string> ng = no_grad;
  for (auto* v : sb.vars())
    if (v->stop_gradient() || !is_float(v->dtype())) ng.insert(v->name());
  for (auto& n : outer)
    if (const Variable* v = sb.find_var(n); v && (v->stop_gradient() || !is_float(v->dtype()) || (v->is_parameter() && !v->param()->trainable))) ng.insert(n);
  return ng;
}

/// The grad maker of `recurrent`: builds the grad block of its step block (the step's grad ops, as
/// append_backward makes them for a block, seeded by the gradients of the step outputs and of the states the
/// memories follow) and returns the recurrent_grad op that runs it over the saved step scopes. `no_grad` names
/// the outer variables whose gradients are not wanted.
inline Operator recurrent_grad(Program& program, const Operator& op, const std::set<std::string>& no_grad) {
  using R = ops::Recurrent;
  using G = ops::RecurrentGrad;
  const Block& sb = program.block(op.sub_block());
  const auto step_outputs = op.attr(R::step_outputs), states = op.attr(R::states);
  std::vector<std::string> seeds;  // the step block's variables whose gradients come from outside the step
  for (auto* names : {&step_outputs, &states})
    for (auto& n : *names)
      if (std::find(seeds.begin(), seeds.end(), n) == seeds.end()) seeds.push_back(n);

  std::set<std::string> ng = sub_block_no_grad(sb, no_grad, op.input(R::parameters));
  // A step input whose outer variable wants no gradient needs none inside the step either.
  for (size_t i = 0; i < op.input(R::inputs).size(); ++i)
    if (no_grad.count(op.input(R::inputs)[i])) ng.insert(op.attr(R::step_inputs).at(i));
  const SubGradBlock built = build_sub_grad_block(program, sb, seeds, ng, "a recurrent group's step");
  const std::vector<std::string>& seed_names = built.seed_names;
  const Block& gb = program.block(built.block);

  Operator g{std::string(G::type)};
  auto grads_of = [&](const std::vector<std::string>& names) {
    std::vector<std::string> out;
    for (auto& n : names) out.push_back(no_grad.count(n) ? std::string(kEmptyVarName) : grad_var_name(n));
    return out;
  };
  g.set_input(G::inputs, op.input(R::inputs)).set_input(G::initial_states, op.input(R::initial_states)).set_input(G::parameters, op.input(R::parameters));
  g.set_input(G::outputs, op.output(R::outputs)).set_input(G::step_scopes, op.output(R::step_scopes));
  std::vector<std::string> out_grads;
  for (auto& n : op.output(R::outputs)) out_grads.push_back(grad_var_name(n));
  g.set_input(G::outputs_grad, out_grads);
  g.set_output(G::inputs_grad, grads_of(op.input(R::inputs)));
  if (!op.input(R::initial_states).empty()) g.set_output(G::initial_states_grad, grads_of(op.input(R::initial_states)));
  if (!op.input(R::parameters).empty()) g.set_output(G::parameters_grad, grads_of(op.input(R::parameters)));
  g.set_attr(G::sub_block, BlockRef{gb.idx()});
  g.set_attr(G::step_inputs, op.attr(R::step_inputs)).set_attr(G::step_outputs, step_outputs);
  g.set_attr(G::ex_states, op.attr(R::ex_states)).set_attr(G::states, states).set_attr(G::boot_states, op.attr(R::boot_states));
  std::vector<std::string> output_seeds, state_seeds;
  auto seed_of = [&](const std::string& n) { return seed_names[size_t(std::find(seeds.begin(), seeds.end(), n) - seeds.begin())]; };
  for (auto& n : step_outputs) output_seeds.push_back(seed_of(n));
  for (auto& n : states) state_seeds.push_back(seed_of(n));
  g.set_attr(G::output_seeds, output_seeds).set_attr(G::state_seeds, state_seeds);
  g.set_origin(op.origin());
  return g;
}

/// The grad maker of `conditional_block` (Fluid's ConditionalBlockGradMaker): builds the grad block of its
/// sub-block, seeded by the gradients of its outputs (outer variables the sub-block writes; the executor puts
/// `Out@GRAD` into the grad block's `Out@GRAD` before running it), and returns the conditional_block_grad op
/// that runs it in the forward's scope. `no_grad` names the outer variables whose gradients are not wanted.
inline Operator conditional_block_grad(Program& program, const Operator& op, const std::set<std::string>& no_grad) {
  using C = ops::ConditionalBlock;
  using G = ops::ConditionalBlockGrad;
  const Block& sb = program.block(op.sub_block());
  const std::vector<std::string>& outs = op.output(C::out);
  std::set<std::string> ng = sub_block_no_grad(sb, no_grad, op.input(C::input));
  const SubGradBlock built = build_sub_grad_block(program, sb, outs, ng, "a cond's body");
  for (size_t k = 0; k < outs.size(); ++k)
    // Nothing inside reads an output of the block (it is only written there), so no grad op renames its seed.
    if (built.seed_names[k] != grad_var_name(outs[k]))
      throw Error(fmt::format("append_backward: the body of a cond reads its own output '{}', which has no gradient yet", outs[k]), op.origin());

  Operator g{std::string(G::type)};
  std::vector<std::string> out_grads, in_grads;
  for (auto& n : outs) out_grads.push_back(grad_var_name(n));
  for (auto& n : op.input(C::input)) in_grads.push_back(ng.count(n) ? std::string(kEmptyVarName) : grad_var_name(n));
  g.set_input(G::cond, op.input(C::cond)).set_input(G::input, op.input(C::input)).set_input(G::out, outs).set_input(G::out_grad, out_grads);
  g.set_input(G::scope, op.output(C::scope));
  g.set_output(G::input_grad, in_grads);
  g.set_attr(G::sub_block, BlockRef{built.block}).set_attr(G::is_scalar_condition, op.attr(C::is_scalar_condition));
  g.set_origin(op.origin());
  return g;
}

/// The grad maker of `while`: builds the grad block of its body, seeded by the gradients of the loop variables'
/// next values (`states`, floating point only) and of the outer variables the body writes in place (Out), and
/// returns the while_grad op that runs it over the saved step scopes. `no_grad` names the outer variables whose
/// gradients are not wanted.
inline Operator while_grad(Program& program, const Operator& op, const std::set<std::string>& no_grad) {
  using W = ops::While;
  using G = ops::WhileGrad;
  const Block& sb = program.block(op.sub_block());
  const auto states = op.attr(W::states), ex_states = op.attr(W::ex_states);
  const std::vector<std::string>& outs = op.output(W::out);
  std::set<std::string> ng = sub_block_no_grad(sb, no_grad, op.input(W::x));
  std::vector<std::string> seeds;
  std::vector<int> seed_of_state(states.size(), -1);
  for (size_t m = 0; m < states.size(); ++m) {
    const Variable* v = sb.find_var(states[m]);
    if (!v || !is_float(v->dtype()) || ng.count(states[m])) continue;
    auto it = std::find(seeds.begin(), seeds.end(), states[m]);
    if (it != seeds.end())
      throw Error(fmt::format("append_backward: a while loop's body hands on '{}' as two loop variables; give each its own value", states[m]), op.origin());
    seed_of_state[m] = int(seeds.size());
    seeds.push_back(states[m]);
  }
  for (auto& n : outs) {
    const Variable* v = sb.find_var(n);
    if (v && v->kind() != VarKind::lod_tensor_array && !is_float(v->dtype())) continue;
    if (std::find(op.input(W::x).begin(), op.input(W::x).end(), n) != op.input(W::x).end())
      throw Error(fmt::format("append_backward: a while loop's body both reads and writes the outer variable '{}', which has no gradient; carry it as a loop "
                              "variable instead",
                              n),
                  op.origin());
    seeds.push_back(n);
  }
  const SubGradBlock built = build_sub_grad_block(program, sb, seeds, ng, "a while loop's body");
  for (size_t k = 0; k < seeds.size(); ++k)
    if (std::find(outs.begin(), outs.end(), seeds[k]) != outs.end() && built.seed_names[k] != grad_var_name(seeds[k]))
      throw Error(fmt::format("append_backward: the body of a while loop reads '{}', which it also writes, and that has no gradient yet", seeds[k]), op.origin());

  Operator g{std::string(G::type)};
  auto grads_of = [&](const std::vector<std::string>& names) {
    std::vector<std::string> out;
    for (auto& n : names) out.push_back(no_grad.count(n) || ng.count(n) ? std::string(kEmptyVarName) : grad_var_name(n));
    return out;
  };
  std::vector<std::string> final_grads, state_seeds;
  for (size_t m = 0; m < states.size(); ++m) {
    final_grads.push_back(seed_of_state[m] < 0 ? std::string(kEmptyVarName) : grad_var_name(op.output(W::final_states)[m]));
    state_seeds.push_back(seed_of_state[m] < 0 ? std::string(kEmptyVarName) : built.seed_names[size_t(seed_of_state[m])]);
  }
  std::vector<std::string> out_grads, out_seeds;
  for (size_t k = 0; k < seeds.size(); ++k)
    if (std::find(outs.begin(), outs.end(), seeds[k]) != outs.end()) {
      out_grads.push_back(grad_var_name(seeds[k]));
      out_seeds.push_back(built.seed_names[k]);
    }
  g.set_input(G::x, op.input(W::x)).set_input(G::init_states, op.input(W::init_states)).set_input(G::out, outs).set_input(G::out_grad, out_grads);
  g.set_input(G::final_states, op.output(W::final_states)).set_input(G::final_states_grad, final_grads).set_input(G::step_scopes, op.output(W::step_scopes));
  g.set_output(G::x_grad, grads_of(op.input(W::x)));
  std::vector<std::string> init_grads;
  for (size_t m = 0; m < states.size(); ++m)
    init_grads.push_back(seed_of_state[m] < 0 || no_grad.count(op.input(W::init_states)[m]) ? std::string(kEmptyVarName) : grad_var_name(op.input(W::init_states)[m]));
  g.set_output(G::init_states_grad, init_grads);
  g.set_attr(G::sub_block, BlockRef{built.block});
  g.set_attr(G::ex_states, ex_states).set_attr(G::states, states).set_attr(G::state_seeds, state_seeds).set_attr(G::out_seeds, out_seeds);
  g.set_origin(op.origin());
  return g;
}

/// The grad ops of `op` (in block `b`): the control-flow ops' makers build grad blocks; the others use their
/// schema's maker.
inline std::vector<Operator> grad_ops_of(Program& program, const Operator& op, const Block& b, const std::set<std::string>& ng) {
  if (op.type() == ops::Recurrent::type) return {recurrent_grad(program, op, ng)};
  if (op.type() == ops::ConditionalBlock::type) return {conditional_block_grad(program, op, ng)};
  if (op.type() == ops::While::type) return {while_grad(program, op, ng)};
  const OpDef& d = op_def(op.type());
  if (!d.grad) throw Error(fmt::format("append_backward: op '{}' has no gradient", op.type()), op.origin());
  GradContext gc(op, b, ng);
  return d.grad(gc);
}

}  // namespace detail

OAR_FUNC std::vector<ParamGrad> append_backward(Program& program, const std::string& loss, const std::set<std::string>& no_grad_set,
                                                const std::set<std::string>& wanted) {
  Block& b = program.global_block();
  Variable* lv = b.find_var(loss);
  if (!lv) throw Error(fmt::format("append_backward: no variable '{}' in the global block", loss));
  if (lv->shape().numel() != 1)
    throw Error(fmt::format("append_backward: the loss '{}' must have one element, got shape {} (reduce it, e.g. with oar::mean)", loss, lv->shape().str()),
                lv->writer() ? lv->writer()->origin() : Origin{});
  int loss_op = -1;
  for (size_t i = 0; i < b.num_ops(); ++i)
    for (auto& n : b.op(i).output_names())
      if (n == loss) loss_op = int(i);
  if (loss_op < 0) throw Error(fmt::format("append_backward: no op computes the loss '{}'", loss));

  std::set<std::string> no_grad = no_grad_set;
  for (auto* v : b.vars()) {
    bool stop = v->stop_gradient() || !is_float(v->dtype()) || (v->is_parameter() && !v->param()->trainable);
    if (stop) no_grad.insert(v->name());
  }
  // Wanted variables that would stop gradients: their readers' grad ops compute X@GRAD, but X stays out of
  // `needed`, so the ops computing X are not reached through it.
  std::set<std::string> stopped;
  for (auto& w : wanted) {
    const Variable* v = b.find_var(w);
    if (!v) throw Error(fmt::format("append_backward: the gradient of '{}' is wanted, but the global block has no such variable", w));
    if (!is_float(v->dtype()))
      throw Error(fmt::format("append_backward: the gradient of '{}' is wanted, but only floating-point variables have one and '{}' is {}", w, w,
                              oar::name(v->dtype())),
                  v->origin());
    if (no_grad.count(w)) stopped.insert(w);
  }

  // The ops the loss depends on through differentiable variables.
  std::set<std::string> needed = {loss};
  std::vector<size_t> path;
  for (int i = loss_op; i >= 0; --i) {
    const Operator& op = b.op(size_t(i));
    bool on = false;
    for (auto& n : op.output_names()) on = on || needed.count(n);
    if (!on) continue;
    path.push_back(size_t(i));
    for (auto& n : op.input_names())
      if (!no_grad.count(n)) needed.insert(n);
  }

  std::vector<Operator> grads;
  using F = ops::FillConstant;
  Operator seed{std::string(F::type)};
  seed.set_output(F::out, {grad_var_name(loss)});
  seed.set_attr(F::shape, std::vector<int64_t>{1}).set_attr(F::value, 1.0f).set_attr(F::dtype, int32_t(lv->dtype()));
  grads.push_back(seed);
  for (size_t i : path) {
    const Operator& op = b.op(i);
    bool wants_any = false;
    for (auto& n : op.input_names()) wants_any = wants_any || (needed.count(n) && !no_grad.count(n)) || stopped.count(n);
    if (!wants_any) continue;
    const OpDef& d = op_def(op.type());
    if (!d.grad && op.sub_block() < 0)
      throw Error(fmt::format("append_backward: op '{}' has no gradient, but the loss depends on its inputs {}", op.type(), fmt::join(op.input_names(), ", ")),
                  op.origin());
    // Inputs not on a differentiable path get no gradient either.
    std::set<std::string> ng = no_grad;
    for (auto& s : stopped) ng.erase(s);
    for (auto& n : op.input_names())
      if (!needed.count(n) && !stopped.count(n)) ng.insert(n);
    for (auto& g : detail::grad_ops_of(program, op, b, ng)) {
      if (g.origin().line == 0) g.set_origin(op.origin());
      // The op writes a wanted variable that stops gradients (and is on the path through another output):
      // its grad op reads a zero gradient of it, as without `wanted`, not the X@GRAD computed for the caller.
      for (auto& n : op.output_names())
        if (stopped.count(n)) g.rename_input(grad_var_name(n), grad_var_name(n) + "@STOPPED");
      grads.push_back(std::move(g));
    }
  }
  grads = detail::add_up_repeated_grads(std::move(grads));

  // A gradient input nobody produces (an unused output of a forward op) is zero.
  std::set<std::string> produced;
  std::vector<Operator> final_ops;
  for (auto& g : grads) {
    for (auto& n : g.input_names())
      if (detail::is_grad_name(n) && !produced.count(n)) {
        using Z = ops::FillZerosLike;
        Operator z{std::string(Z::type)};
        z.set_input(Z::x, {detail::forward_name(n)}).set_output(Z::out, {n});
        final_ops.push_back(std::move(z));
        produced.insert(n);
      }
    for (auto& n : g.output_names()) produced.insert(n);
    final_ops.push_back(std::move(g));
  }
  for (auto& g : final_ops) {
    for (auto& n : g.output_names())
      if (n != kEmptyVarName && !b.find_var(n)) {
        const Variable* fw = b.find_var(detail::forward_name(n));
        VarSpec spec;
        if (fw) spec = {.dtype = fw->dtype(), .shape = fw->shape(), .lod_level = fw->lod_level(), .kind = detail::grad_kind(*fw)};
        b.create_var(n, spec);
      }
    add_op(b, std::move(g));
  }
  b.var(grad_var_name(loss)).set_persistable(false);

  std::vector<ParamGrad> out;
  for (auto* p : b.parameters())
    if (p->param()->trainable && produced.count(grad_var_name(p->name()))) out.push_back({p->name(), grad_var_name(p->name())});
  return out;
}

}  // namespace oar
