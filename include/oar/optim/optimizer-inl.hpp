// oar/optim/optimizer-inl.hpp: the implementation of optimizer.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/optim/optimizer.hpp"

#include "oar/ops/assign.hpp"
#include "oar/ops/compare.hpp"
#include "oar/ops/fill_constant.hpp"
#include "oar/ops/list_optim.hpp"
#include "oar/ops/lr_schedule.hpp"
#include "oar/ops/registry.hpp"
#include "oar/ops/scale.hpp"
#include "oar/ops/sum.hpp"

namespace oar::optim {

OAR_FUNC Schedule exponential_decay(double decay_steps, double decay_rate, bool staircase) {
  using S = ops::LrSchedule;
  return {"exponential", {{S::decay_steps, float(decay_steps)}, {S::decay_rate, float(decay_rate)}, {S::staircase, staircase}}};
}

OAR_FUNC Schedule natural_exp_decay(double decay_steps, double decay_rate, bool staircase) {
  using S = ops::LrSchedule;
  return {"natural_exp", {{S::decay_steps, float(decay_steps)}, {S::decay_rate, float(decay_rate)}, {S::staircase, staircase}}};
}

OAR_FUNC Schedule inverse_time_decay(double decay_steps, double decay_rate, bool staircase) {
  using S = ops::LrSchedule;
  return {"inverse_time", {{S::decay_steps, float(decay_steps)}, {S::decay_rate, float(decay_rate)}, {S::staircase, staircase}}};
}

OAR_FUNC Schedule polynomial_decay(double decay_steps, double end_lr, double power, bool cycle) {
  using S = ops::LrSchedule;
  return {"polynomial", {{S::decay_steps, float(decay_steps)}, {S::end_learning_rate, float(end_lr)}, {S::power, float(power)}, {S::cycle, cycle}}};
}

OAR_FUNC Schedule piecewise_decay(std::vector<float> boundaries, std::vector<float> values) {
  using S = ops::LrSchedule;
  return {"piecewise", {{S::boundaries, std::move(boundaries)}, {S::values, std::move(values)}}};
}

OAR_FUNC Schedule cosine_decay(double total_steps, double warmup_steps) {
  using S = ops::LrSchedule;
  return {"cosine", {{S::total_steps, float(total_steps)}, {S::warmup_steps, float(warmup_steps)}}};
}

OAR_FUNC Schedule noam_decay(double d_model, double warmup_steps) {
  using S = ops::LrSchedule;
  return {"noam", {{S::d_model, float(d_model)}, {S::warmup_steps, float(warmup_steps)}}};
}

OAR_FUNC Schedule linear_warmup(double warmup_steps, double start_lr) {
  using S = ops::LrSchedule;
  return {"linear_warmup", {{S::warmup_steps, float(warmup_steps)}, {S::start_learning_rate, float(start_lr)}}};
}

OAR_FUNC Rule sgd(double lr) { return {std::string(ops::Sgd::type), lr, {}}; }

OAR_FUNC Rule momentum(double lr, double mu, bool nesterov) {
  using O = ops::Momentum;
  return {std::string(O::type), lr, {{O::mu, float(mu)}, {O::use_nesterov, nesterov}}};
}

OAR_FUNC Rule adagrad(double lr, double epsilon) { return {std::string(ops::Adagrad::type), lr, {{ops::Adagrad::epsilon, float(epsilon)}}}; }

OAR_FUNC Rule decayed_adagrad(double lr, double decay, double epsilon) {
  using O = ops::DecayedAdagrad;
  return {std::string(O::type), lr, {{O::decay, float(decay)}, {O::epsilon, float(epsilon)}}};
}

OAR_FUNC Rule adam(double lr, double beta1, double beta2, double epsilon) {
  using O = ops::Adam;
  return {std::string(O::type), lr, {{O::beta1, float(beta1)}, {O::beta2, float(beta2)}, {O::epsilon, float(epsilon)}}};
}

OAR_FUNC Rule adamw(double lr, double coeff, double beta1, double beta2, double epsilon) {
  using O = ops::AdamW;
  return {std::string(O::type), lr, {{O::beta1, float(beta1)}, {O::beta2, float(beta2)}, {O::epsilon, float(epsilon)}, {O::coeff, float(coeff)}}};
}

OAR_FUNC Rule adamax(double lr, double beta1, double beta2, double epsilon) {
  using O = ops::Adamax;
  return {std::string(O::type), lr, {{O::beta1, float(beta1)}, {O::beta2, float(beta2)}, {O::epsilon, float(epsilon)}}};
}

OAR_FUNC Rule rmsprop(double lr, double rho, double epsilon, double momentum, bool centered) {
  using O = ops::Rmsprop;
  return {std::string(O::type), lr, {{O::decay, float(rho)}, {O::epsilon, float(epsilon)}, {O::momentum, float(momentum)}, {O::centered, centered}}};
}

OAR_FUNC Rule adadelta(double rho, double epsilon) {
  using O = ops::Adadelta;
  return {std::string(O::type), 1.0, {{O::rho, float(rho)}, {O::epsilon, float(epsilon)}}};
}

OAR_FUNC Rule lamb(double lr, double weight_decay, double beta1, double beta2, double epsilon) {
  using O = ops::Lamb;
  return {std::string(O::type), lr,
          {{O::beta1, float(beta1)}, {O::beta2, float(beta2)}, {O::epsilon, float(epsilon)}, {O::weight_decay, float(weight_decay)}}};
}

namespace detail {
/// A persistable global of `main` initialized in `startup`.
inline void make_global(Program& main, Program& startup, const std::string& name, DType t, Shape s, double value) {
  for (Program* p : {&main, &startup}) {
    Variable& v = p->global_block().create_var(name, {.dtype = t, .shape = s, .persistable = true});
    v.set_stop_gradient(true);
  }
  using F = ops::FillConstant;
  Operator op{std::string(F::type)};
  op.set_output(F::out, {name});
  op.set_attr(F::shape, std::vector<int64_t>(s.begin(), s.end())).set_attr(F::dtype, int32_t(t)).set_attr(F::value, float(value));
  validate_op(op);
  startup.global_block().append_op(std::move(op));
}

/// The value of attribute `a` of update op `Op` under `rule`: the rule's own, else the op's default.
template <class Op, class T>
T rule_attr(const Rule& rule, Attr<T> a) {
  if (auto it = rule.attrs.find(std::string(a.name)); it != rule.attrs.end()) return attr_as<T>(it->second, a.name);
  const OpDef def = Op::def();
  const AttrDef* d = def.find_attr(a.name);
  if (!d || !d->dflt) throw Error(fmt::format("update rule '{}' needs attribute '{}'", rule.type, a.name));
  return attr_as<T>(*d->dflt, a.name);
}

/// The update op `Op` of parameter `p` (gradient `g`, learning rate `lr`): its accumulators (the op's
/// `accumulators`) become persistable globals `<p>.<slot>` of `main`, initialized in `startup`, each passed
/// as both the op's input and its output.
template <class Op>
Operator update_op(Program& main, Program& startup, const Rule& rule, const Variable& pv, const std::string& p, const std::string& g,
                   const std::string& lr) {
  using ops::param_update::Accumulator;
  Operator op{std::string(Op::type)};
  op.set_input(Op::param, {p}).set_input(Op::grad, {g}).set_output(Op::param_out, {p});
  if constexpr (requires { Op::learning_rate; }) op.set_input(Op::learning_rate, {lr});
  for (const Accumulator& a : Op::accumulators) {
    if (!a.only_if.name.empty() && !rule_attr<Op>(rule, a.only_if)) continue;
    const double init = a.init_attr.name.empty() ? a.init : double(rule_attr<Op>(rule, a.init_attr));
    const std::string n = p + "." + std::string(a.in.name);
    make_global(main, startup, n, pv.dtype(), a.extent == Accumulator::Extent::scalar ? Shape{1} : pv.shape(), init);
    op.set_input(a.in, {n}).set_output(a.out, {n});
  }
  for (auto& [k, v] : rule.attrs) op.set_attr(k, v);
  return op;
}

/// Whether `type` is one of the update ops (ops/list_optim.hpp).
inline bool is_update_op(std::string_view type) {
  bool found = false;
  for_each_op(OptimOps{}, [&]<class Op>() { found = found || Op::type == type; });
  return found;
}
}  // namespace detail

OAR_FUNC std::string append_update(Program& main, Program& startup, const Rule& rule, const std::vector<ParamGrad>& params_grads, int block,
                                    const std::string& skip) {
  if (!detail::is_update_op(rule.type)) throw Error(fmt::format("unknown update rule '{}'", rule.type));
  Block& b = main.block(block);
  // Fluid's minimize order: clip the raw gradients first, then add the decay (the decay is not clipped).
  std::vector<ParamGrad> pg = append_regularization(b, append_gradient_clip(b, params_grads, rule.clip), rule.regularization);

  std::string lr = "learning_rate_0";
  if (rule.schedule) {
    using S = ops::LrSchedule;
    detail::make_global(main, startup, kStepCounter, DType::f32, Shape{1}, 0.0);
    b.create_var(lr, {.dtype = DType::f32, .shape = Shape{1}});
    Operator op{std::string(S::type)};
    op.set_input(S::step, {kStepCounter}).set_output(S::learning_rate, {lr});
    op.set_attr(S::kind, rule.schedule->kind).set_attr(S::learning_rate_attr, float(rule.learning_rate));
    for (auto& [k, v] : rule.schedule->attrs) op.set_attr(k, v);
    add_op(b, std::move(op));
    if (skip.empty()) {
      using I = ops::Increment;
      Operator inc{std::string(I::type)};
      inc.set_input(I::x, {kStepCounter}).set_output(I::out, {kStepCounter}).set_attr(I::step, 1.0f);
      add_op(b, std::move(inc));
    } else {  // counter += float(!skip): data, not control flow, so that the device never asks the host
      const std::string keep = skip + ".not", one = std::string(kStepCounter) + ".step";
      b.create_var(keep, {.dtype = DType::boolean, .shape = Shape{1}, .stop_gradient = true});
      b.create_var(one, {.dtype = DType::f32, .shape = Shape{1}, .stop_gradient = true});
      Operator neg{std::string(ops::LogicalNot::type)};
      neg.set_input(ops::LogicalNot::x, {skip}).set_output(ops::LogicalNot::out, {keep});
      add_op(b, std::move(neg));
      using C = ops::Cast;
      Operator cast{std::string(C::type)};
      cast.set_input(C::x, {keep}).set_output(C::out, {one}).set_attr(C::in_dtype, int32_t(DType::boolean)).set_attr(C::out_dtype, int32_t(DType::f32));
      add_op(b, std::move(cast));
      Operator sum{std::string(ops::Sum::type)};
      sum.set_input(ops::Sum::x, {kStepCounter, one}).set_output(ops::Sum::out, {kStepCounter});
      add_op(b, std::move(sum));
    }
  } else {
    detail::make_global(main, startup, lr, DType::f32, Shape{1}, rule.learning_rate);
  }

  for (auto& [p, g] : pg) {
    const Variable& pv = b.var_recursive(p);
    std::string plr = lr;
    if (pv.param() && pv.param()->learning_rate != 1.0f) {  // per-parameter scale of the learning rate
      plr = p + "@LR";
      b.create_var(plr, {.dtype = DType::f32, .shape = Shape{1}});
      using Sc = ops::Scale;
      Operator s{std::string(Sc::type)};
      s.set_input(Sc::x, {lr}).set_output(Sc::out, {plr}).set_attr(Sc::scale, float(pv.param()->learning_rate));
      add_op(b, std::move(s));
    }
    if (pv.dtype() != DType::f32 && is_float(pv.dtype())) {
      // The learning rate in the parameter's type (an f64 model): the CUDA kernels read it as Param's type, and
      // the CPU's read it as a double either way. f32 -> f64 is exact, so nothing changes on the CPU.
      const std::string typed = plr + "." + std::string(name(pv.dtype()));
      if (!b.find_var(typed)) {
        b.create_var(typed, {.dtype = pv.dtype(), .shape = Shape{1}});
        using C = ops::Cast;
        Operator cast{std::string(C::type)};
        cast.set_input(C::x, {plr}).set_output(C::out, {typed}).set_attr(C::in_dtype, int32_t(DType::f32)).set_attr(C::out_dtype, int32_t(pv.dtype()));
        add_op(b, std::move(cast));
      }
      plr = typed;
    }
    for_each_op(OptimOps{}, [&]<class Op>() {
      if (Op::type != rule.type) return;
      Operator op = detail::update_op<Op>(main, startup, rule, pv, p, g, plr);
      if (!skip.empty()) op.set_input(ops::param_update::skip_update, {skip});
      add_op(b, std::move(op));
    });
  }
  return lr;
}

}  // namespace oar::optim
