// oar/optim/optimizer.hpp: update rules (sgd, momentum, adagrad, decayed_adagrad, adam, adamw, adamax,
// rmsprop, adadelta, lamb) and `append_update`, which appends clipping, regularization, the learning rate
// (with its schedule) and one update op per parameter, with the rule's accumulators as persistable globals.
#pragma once
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
  return {"exponential", {{"decay_steps", float(decay_steps)}, {"decay_rate", float(decay_rate)}, {"staircase", staircase}}};
}
/// lr * e^(-rate * step / decay_steps)
inline Schedule natural_exp_decay(double decay_steps, double decay_rate, bool staircase = false) {
  return {"natural_exp", {{"decay_steps", float(decay_steps)}, {"decay_rate", float(decay_rate)}, {"staircase", staircase}}};
}
/// lr / (1 + rate * step / decay_steps)
inline Schedule inverse_time_decay(double decay_steps, double decay_rate, bool staircase = false) {
  return {"inverse_time", {{"decay_steps", float(decay_steps)}, {"decay_rate", float(decay_rate)}, {"staircase", staircase}}};
}
/// (lr - end) (1 - min(step, decay_steps) / decay_steps)^power + end
inline Schedule polynomial_decay(double decay_steps, double end_lr = 1e-4, double power = 1.0, bool cycle = false) {
  return {"polynomial", {{"decay_steps", float(decay_steps)}, {"end_learning_rate", float(end_lr)}, {"power", float(power)}, {"cycle", cycle}}};
}
/// values[i] while step < boundaries[i], values.back() afterwards
inline Schedule piecewise_decay(std::vector<float> boundaries, std::vector<float> values) {
  return {"piecewise", {{"boundaries", std::move(boundaries)}, {"values", std::move(values)}}};
}
/// lr / 2 (1 + cos(pi min(step, total) / total))
inline Schedule cosine_decay(double total_steps) { return {"cosine", {{"total_steps", float(total_steps)}}}; }
/// lr d_model^-0.5 min(s^-0.5, warmup^-1.5 s), s = step + 1
inline Schedule noam_decay(double d_model, double warmup_steps) {
  return {"noam", {{"d_model", float(d_model)}, {"warmup_steps", float(warmup_steps)}}};
}
/// start + (lr - start) step / warmup_steps, then lr
inline Schedule linear_warmup(double warmup_steps, double start_lr = 0) {
  return {"linear_warmup", {{"warmup_steps", float(warmup_steps)}, {"start_learning_rate", float(start_lr)}}};
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
inline Rule sgd(double lr) { return {"sgd", lr, {}}; }
/// v = mu v + g; p -= lr v (Nesterov: p -= lr (g + mu v))
inline Rule momentum(double lr, double mu = 0.9, bool nesterov = false) { return {"momentum", lr, {{"mu", float(mu)}, {"use_nesterov", nesterov}}}; }
/// m += g^2; p -= lr g / (sqrt(m) + eps)
inline Rule adagrad(double lr, double epsilon = 1e-6) { return {"adagrad", lr, {{"epsilon", float(epsilon)}}}; }
/// m = decay m + (1 - decay) g^2; p -= lr g / (sqrt(m) + eps)
inline Rule decayed_adagrad(double lr, double decay = 0.95, double epsilon = 1e-6) {
  return {"decayed_adagrad", lr, {{"decay", float(decay)}, {"epsilon", float(epsilon)}}};
}
/// Adam (Kingma and Ba) with bias correction in the step size.
inline Rule adam(double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double epsilon = 1e-8) {
  return {"adam", lr, {{"beta1", float(beta1)}, {"beta2", float(beta2)}, {"epsilon", float(epsilon)}}};
}
/// Adam with decoupled weight decay `coeff`.
inline Rule adamw(double lr = 1e-3, double coeff = 0.01, double beta1 = 0.9, double beta2 = 0.999, double epsilon = 1e-8) {
  return {"adamw", lr, {{"beta1", float(beta1)}, {"beta2", float(beta2)}, {"epsilon", float(epsilon)}, {"coeff", float(coeff)}}};
}
/// Adam with the infinity norm.
inline Rule adamax(double lr = 2e-3, double beta1 = 0.9, double beta2 = 0.999, double epsilon = 1e-8) {
  return {"adamax", lr, {{"beta1", float(beta1)}, {"beta2", float(beta2)}, {"epsilon", float(epsilon)}}};
}
/// ms = rho ms + (1 - rho) g^2; mom = momentum mom + lr g / sqrt(ms + eps); p -= mom (centered: ms - mg^2)
inline Rule rmsprop(double lr, double rho = 0.95, double epsilon = 1e-6, double momentum = 0.0, bool centered = false) {
  return {"rmsprop", lr, {{"decay", float(rho)}, {"epsilon", float(epsilon)}, {"momentum", float(momentum)}, {"centered", centered}}};
}
/// Adadelta (no learning rate).
inline Rule adadelta(double rho = 0.95, double epsilon = 1e-6) { return {"adadelta", 1.0, {{"rho", float(rho)}, {"epsilon", float(epsilon)}}}; }
/// LAMB: Adam direction plus weight decay, scaled by the trust ratio |p| / |r|.
inline Rule lamb(double lr = 1e-3, double weight_decay = 0.01, double beta1 = 0.9, double beta2 = 0.999, double epsilon = 1e-6) {
  return {"lamb", lr, {{"beta1", float(beta1)}, {"beta2", float(beta2)}, {"epsilon", float(epsilon)}, {"weight_decay", float(weight_decay)}}};
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
  Operator op("fill_constant");
  op.set_output("Out", {name}).set_attr("shape", std::vector<int64_t>(s.begin(), s.end())).set_attr("dtype", int32_t(t)).set_attr("value", float(value));
  validate_op(op);
  startup.global_block().append_op(std::move(op));
}
}  // namespace detail

/// Appends to `main`'s global block: clipping, regularization (in Fluid's order), the learning rate (and its schedule step), and
/// the update op of `rule` for every (param, grad). Accumulators are persistable globals named
/// `<param>.<slot>` initialized in `startup`. Returns the name of the learning-rate variable.
inline std::string append_update(Program& main, Program& startup, const Rule& rule, const std::vector<ParamGrad>& params_grads) {
  Block& b = main.global_block();
  // Fluid's minimize order: clip the raw gradients first, then add the decay (the decay is not clipped).
  std::vector<ParamGrad> pg = append_regularization(b, append_gradient_clip(b, params_grads, rule.clip), rule.regularization);

  std::string lr = "learning_rate_0";
  if (rule.schedule) {
    detail::make_global(main, startup, kStepCounter, DType::f32, Shape{1}, 0.0);
    b.create_var(lr, {.dtype = DType::f32, .shape = Shape{1}});
    Operator op("lr_schedule");
    op.set_input("Step", {kStepCounter}).set_output("LearningRate", {lr});
    op.set_attr("kind", rule.schedule->kind).set_attr("learning_rate", float(rule.learning_rate));
    for (auto& [k, v] : rule.schedule->attrs) op.set_attr(k, v);
    add_op(b, std::move(op));
    Operator inc("increment");
    inc.set_input("X", {kStepCounter}).set_output("Out", {kStepCounter}).set_attr("step", 1.0f);
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
      Operator s("scale");
      s.set_input("X", {lr}).set_output("Out", {plr}).set_attr("scale", pv.param()->learning_rate);
      add_op(b, std::move(s));
    }
    Operator op(rule.type);
    op.set_input("Param", {p}).set_input("Grad", {g}).set_output("ParamOut", {p});
    if (rule.type != "adadelta") op.set_input("LearningRate", {plr});
    auto acc = [&](const std::string& slot, double init, Shape s = {}) {
      std::string n = p + "." + slot;
      detail::make_global(main, startup, n, pv.dtype(), s.empty() ? pv.shape() : s, init);
      op.set_input(slot, {n}).set_output(slot + "Out", {n});
    };
    auto beta_pows = [&] {
      double b1 = attr_as<float>(rule.attrs.at("beta1")), b2 = attr_as<float>(rule.attrs.at("beta2"));
      acc("Beta1Pow", b1, Shape{1});
      if (rule.type != "adamax") acc("Beta2Pow", b2, Shape{1});
    };
    const std::string& t = rule.type;
    if (t == "momentum") acc("Velocity", 0);
    else if (t == "adagrad" || t == "decayed_adagrad") acc("Moment", 0);
    else if (t == "adam" || t == "adamw" || t == "lamb") {
      acc("Moment1", 0);
      acc("Moment2", 0);
      beta_pows();
    } else if (t == "adamax") {
      acc("Moment", 0);
      acc("InfNorm", 0);
      beta_pows();
    } else if (t == "rmsprop") {
      acc("Moment", 0);
      acc("MeanSquare", 0);
      if (rule.attrs.count("centered") && std::get<bool>(rule.attrs.at("centered"))) acc("MeanGrad", 0);
    } else if (t == "adadelta") {
      acc("AvgSquaredGrad", 0);
      acc("AvgSquaredUpdate", 0);
    } else if (t != "sgd") {
      throw Error(fmt::format("unknown update rule '{}'", t));
    }
    for (auto& [k, v] : rule.attrs) op.set_attr(k, v);
    add_op(b, std::move(op));
  }
  return lr;
}

}  // namespace oar::optim
