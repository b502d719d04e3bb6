// oar/optim/optimizer.hpp: update rules (sgd, momentum, adagrad, decayed_adagrad, adam, adamw, adamax,
// rmsprop, adadelta, lamb) and `append_update`, which appends clipping, regularization, the learning rate
// (with its schedule) and one update op per parameter, with the accumulators that op declares (its
// `accumulators`, ops/optimizers.hpp) as persistable globals.
#pragma once
#include "oar/ops/assign.hpp"
#include "oar/ops/fill_constant.hpp"
#include "oar/ops/list_optim.hpp"
#include "oar/ops/lr_schedule.hpp"
#include "oar/ops/scale.hpp"
#include "oar/optim/clip.hpp"
#include "oar/optim/regularizer.hpp"

namespace oar::optim {

/// A learning-rate schedule over the step counter (a persistable variable: it checkpoints).
struct Schedule {
  std::string kind = "constant";
  std::map<std::string, Attribute> attrs;
};
/// lr * rate^(step / decay_steps) (floor of the exponent with staircase)
inline Schedule exponential_decay(double decay_steps, double decay_rate, bool staircase = false) {
  using S = ops::LrSchedule;
  return {"exponential", {{S::decay_steps, float(decay_steps)}, {S::decay_rate, float(decay_rate)}, {S::staircase, staircase}}};
}
/// lr * e^(-rate * step / decay_steps)
inline Schedule natural_exp_decay(double decay_steps, double decay_rate, bool staircase = false) {
  using S = ops::LrSchedule;
  return {"natural_exp", {{S::decay_steps, float(decay_steps)}, {S::decay_rate, float(decay_rate)}, {S::staircase, staircase}}};
}
/// lr / (1 + rate * step / decay_steps)
inline Schedule inverse_time_decay(double decay_steps, double decay_rate, bool staircase = false) {
  using S = ops::LrSchedule;
  return {"inverse_time", {{S::decay_steps, float(decay_steps)}, {S::decay_rate, float(decay_rate)}, {S::staircase, staircase}}};
}
/// (lr - end) (1 - min(step, decay_steps) / decay_steps)^power + end
inline Schedule polynomial_decay(double decay_steps, double end_lr = 1e-4, double power = 1.0, bool cycle = false) {
  using S = ops::LrSchedule;
  return {"polynomial", {{S::decay_steps, float(decay_steps)}, {S::end_learning_rate, float(end_lr)}, {S::power, float(power)}, {S::cycle, cycle}}};
}
/// values[i] while step < boundaries[i], values.back() afterwards
inline Schedule piecewise_decay(std::vector<float> boundaries, std::vector<float> values) {
  using S = ops::LrSchedule;
  return {"piecewise", {{S::boundaries, std::move(boundaries)}, {S::values, std::move(values)}}};
}
/// lr / 2 (1 + cos(pi min(step, total) / total))
inline Schedule cosine_decay(double total_steps) { return {"cosine", {{ops::LrSchedule::total_steps, float(total_steps)}}}; }
/// lr d_model^-0.5 min(s^-0.5, warmup^-1.5 s), s = step + 1
inline Schedule noam_decay(double d_model, double warmup_steps) {
  using S = ops::LrSchedule;
  return {"noam", {{S::d_model, float(d_model)}, {S::warmup_steps, float(warmup_steps)}}};
}
/// start + (lr - start) step / warmup_steps, then lr
inline Schedule linear_warmup(double warmup_steps, double start_lr = 0) {
  using S = ops::LrSchedule;
  return {"linear_warmup", {{S::warmup_steps, float(warmup_steps)}, {S::start_learning_rate, float(start_lr)}}};
}

/// An update rule: the op type, the learning rate, the op's attributes, and options shared by all parameters.
struct Rule {
  std::string type;
  double learning_rate = 0.01;
  std::map<std::string, Attribute> attrs;
  std::optional<Schedule> schedule;
  std::optional<Regularizer> regularization;  ///< for parameters without their own
  std::optional<GradientClip> clip;           ///< for parameters without their own

  Rule& with_schedule(Schedule s) { schedule = std::move(s); return *this; }
  Rule& with_regularization(Regularizer r) { regularization = r; return *this; }
  Rule& with_clip(GradientClip c) { clip = c; return *this; }
};

/// p -= lr g
inline Rule sgd(double lr) { return {std::string(ops::Sgd::type), lr, {}}; }
/// v = mu v + g; p -= lr v (Nesterov: p -= lr (g + mu v))
inline Rule momentum(double lr, double mu = 0.9, bool nesterov = false) {
  using O = ops::Momentum;
  return {std::string(O::type), lr, {{O::mu, float(mu)}, {O::use_nesterov, nesterov}}};
}
/// m += g^2; p -= lr g / (sqrt(m) + eps)
inline Rule adagrad(double lr, double epsilon = 1e-6) { return {std::string(ops::Adagrad::type), lr, {{ops::Adagrad::epsilon, float(epsilon)}}}; }
/// m = decay m + (1 - decay) g^2; p -= lr g / (sqrt(m) + eps)
inline Rule decayed_adagrad(double lr, double decay = 0.95, double epsilon = 1e-6) {
  using O = ops::DecayedAdagrad;
  return {std::string(O::type), lr, {{O::decay, float(decay)}, {O::epsilon, float(epsilon)}}};
}
/// Adam (Kingma and Ba) with bias correction in the step size.
inline Rule adam(double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double epsilon = 1e-8) {
  using O = ops::Adam;
  return {std::string(O::type), lr, {{O::beta1, float(beta1)}, {O::beta2, float(beta2)}, {O::epsilon, float(epsilon)}}};
}
/// Adam with decoupled weight decay `coeff`.
inline Rule adamw(double lr = 1e-3, double coeff = 0.01, double beta1 = 0.9, double beta2 = 0.999, double epsilon = 1e-8) {
  using O = ops::AdamW;
  return {std::string(O::type), lr, {{O::beta1, float(beta1)}, {O::beta2, float(beta2)}, {O::epsilon, float(epsilon)}, {O::coeff, float(coeff)}}};
}
/// Adam with the infinity norm.
inline Rule adamax(double lr = 2e-3, double beta1 = 0.9, double beta2 = 0.999, double epsilon = 1e-8) {
  using O = ops::Adamax;
  return {std::string(O::type), lr, {{O::beta1, float(beta1)}, {O::beta2, float(beta2)}, {O::epsilon, float(epsilon)}}};
}
/// ms = rho ms + (1 - rho) g^2; mom = momentum mom + lr g / sqrt(ms + eps); p -= mom (centered: ms - mg^2)
inline Rule rmsprop(double lr, double rho = 0.95, double epsilon = 1e-6, double momentum = 0.0, bool centered = false) {
  using O = ops::Rmsprop;
  return {std::string(O::type), lr, {{O::decay, float(rho)}, {O::epsilon, float(epsilon)}, {O::momentum, float(momentum)}, {O::centered, centered}}};
}
/// Adadelta (no learning rate).
inline Rule adadelta(double rho = 0.95, double epsilon = 1e-6) {
  using O = ops::Adadelta;
  return {std::string(O::type), 1.0, {{O::rho, float(rho)}, {O::epsilon, float(epsilon)}}};
}
/// LAMB: Adam direction plus weight decay, scaled by the trust ratio |p| / |r|.
inline Rule lamb(double lr = 1e-3, double weight_decay = 0.01, double beta1 = 0.9, double beta2 = 0.999, double epsilon = 1e-6) {
  using O = ops::Lamb;
  return {std::string(O::type), lr,
          {{O::beta1, float(beta1)}, {O::beta2, float(beta2)}, {O::epsilon, float(epsilon)}, {O::weight_decay, float(weight_decay)}}};
}

/// The name of the step counter of learning-rate schedules.
inline constexpr const char* kStepCounter = "@LR_DECAY_COUNTER@";

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

/// Appends to `main`'s global block: clipping, regularization (in Fluid's order), the learning rate (and its schedule step), and
/// the update op of `rule` for every (param, grad). Accumulators are persistable globals named
/// `<param>.<slot>` initialized in `startup`. Returns the name of the learning-rate variable.
inline std::string append_update(Program& main, Program& startup, const Rule& rule, const std::vector<ParamGrad>& params_grads) {
  if (!detail::is_update_op(rule.type)) throw Error(fmt::format("unknown update rule '{}'", rule.type));
  Block& b = main.global_block();
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
    using I = ops::Increment;
    Operator inc{std::string(I::type)};
    inc.set_input(I::x, {kStepCounter}).set_output(I::out, {kStepCounter}).set_attr(I::step, 1.0f);
    add_op(b, std::move(inc));
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
    for_each_op(OptimOps{}, [&]<class Op>() {
      if (Op::type == rule.type) add_op(b, detail::update_op<Op>(main, startup, rule, pv, p, g, plr));
    });
  }
  return lr;
}

}  // namespace oar::optim
