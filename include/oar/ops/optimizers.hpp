// oar/ops/optimizers.hpp: the parameter update ops (sgd, momentum, adagrad, decayed_adagrad, adam, adamw, adamax,
// rmsprop, adadelta, lamb) that an optimizer appends after the backward pass. None has a gradient. Kernels:
// kernels/cpu/optimizers.hpp.
#pragma once
#include <initializer_list>

#include "oar/ops/op.hpp"

namespace oar::ops {

// Conventions shared by every op here (Fluid's):
// - inputs Param, Grad, LearningRate ([1], f32 or f64 whatever Param's dtype) plus per-parameter accumulators of
//   Param's shape (Moment, Velocity, ...) and [1] scalars (Beta1Pow, ...); outputs ParamOut and `<acc>Out` for
//   each accumulator. In a training program ParamOut IS Param (the same variable), MomentOut IS Moment, etc.:
//   the kernels read and write element by element, so an output may be the same tensor as its input.
// - t below is the step count as seen through the Beta pow inputs: Beta1Pow = beta1^t (Fluid initialises it to
//   beta1, so the first step has t = 1).
// - Grad may be SelectedRows (sparse rows) for sgd, adam and adamw only.

namespace param_update {

inline bool is_sparse_grad(const InferShapeContext& c) { return c.input_var("Grad").kind() == VarKind::selected_rows; }

inline bool shapes_match(const Shape& a, const Shape& b) {
  if (a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i)
    if (!dims_compatible(a[i], b[i])) return false;
  return true;
}

/// Shape inference of an update op: Grad (when dense) and each input of `accs` have Param's shape and dtype;
/// LearningRate (when `lr`) and each input of `scalars` hold one value. ParamOut takes Param's shape and dtype,
/// `<acc>Out` its accumulator's, `<scalar>Out` (when asked for) its scalar's.
inline void infer_update(InferShapeContext& c, std::initializer_list<const char*> accs, std::initializer_list<const char*> scalars = {},
                         bool lr = true, bool sparse_ok = false) {
  const Shape& p = c.shape("Param");
  DType t = c.dtype("Param");
  c.check(t == DType::f32 || t == DType::f64, "Param must be float32 or float64, got {}", name(t));
  if (is_sparse_grad(c)) {
    c.check(sparse_ok, "Grad is SelectedRows, but {} takes dense gradients only", c.op().type());
  } else {
    c.check(shapes_match(c.shape("Grad"), p), "Grad {} must have Param's shape {}", c.shape("Grad").str(), p.str());
  }
  c.check(c.dtype("Grad") == t, "Grad is {} but Param is {}", name(c.dtype("Grad")), name(t));
  auto check_scalar = [&](const char* slot) {
    int64_t n = c.shape(slot).numel();
    c.check(n < 0 || n == 1, "{} must hold one value, got shape {}", slot, c.shape(slot).str());
    DType st = c.dtype(slot);
    c.check(st == DType::f32 || st == DType::f64, "{} must be float32 or float64, got {}", slot, name(st));
  };
  if (lr) check_scalar("LearningRate");
  c.set_output("ParamOut", p, t);
  for (const char* a : accs) {
    if (!c.has_input(a)) continue;  // a dispensable accumulator (rmsprop's MeanGrad)
    c.check(shapes_match(c.shape(a), p), "{} {} must have Param's shape {}", a, c.shape(a).str(), p.str());
    c.check(c.dtype(a) == t, "{} is {} but Param is {}", a, name(c.dtype(a)), name(t));
    c.set_output(std::string(a) + "Out", c.shape(a), t);
  }
  for (const char* s : scalars) {
    check_scalar(s);
    c.set_output(std::string(s) + "Out", c.shape(s), c.dtype(s));
  }
}

inline auto beta_check() { return [](float b) { return b >= 0.f && b < 1.f; }; }
inline auto nonneg_check() { return [](float e) { return e >= 0.f; }; }
inline auto unit_check() { return [](float d) { return d >= 0.f && d <= 1.f; }; }

}  // namespace param_update

/// sgd: ParamOut = Param - lr * Grad.
/// Grad SelectedRows {rows, value [n, w...]}: only the listed rows change, ParamOut[rows[i]] -= lr * value[i]
/// (repeated rows add up); the other rows of ParamOut are Param's.
struct Sgd {
  static OpDef def() {
    return OpDef("sgd", "stochastic gradient descent step").in("Param").in("Grad").in("LearningRate").out("ParamOut");
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update(c, {}, {}, true, true); }
  static void eval_cpu(KernelContext&);
};

/// momentum: v' = mu * v + g; ParamOut = p - lr * v', or with use_nesterov p - lr * (g + mu * v').
struct Momentum {
  static OpDef def() {
    return OpDef("momentum", "momentum (heavy-ball or Nesterov) step")
        .in("Param").in("Grad").in("Velocity").in("LearningRate")
        .out("ParamOut").out("VelocityOut")
        .required_attr<float>("mu", "momentum coefficient")
        .attr("use_nesterov", false);
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update(c, {"Velocity"}); }
  static void eval_cpu(KernelContext&);
};

/// adagrad: m' = m + g^2; ParamOut = p - lr * g / (sqrt(m') + epsilon).
struct Adagrad {
  static OpDef def() {
    return OpDef("adagrad", "adaptive gradient step")
        .in("Param").in("Grad").in("Moment").in("LearningRate")
        .out("ParamOut").out("MomentOut")
        .attr("epsilon", 1.0e-6f).check<float>(param_update::nonneg_check(), "must be >= 0");
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update(c, {"Moment"}); }
  static void eval_cpu(KernelContext&);
};

/// decayed_adagrad: m' = decay * m + (1 - decay) * g^2; ParamOut = p - lr * g / (sqrt(m') + epsilon).
struct DecayedAdagrad {
  static OpDef def() {
    return OpDef("decayed_adagrad", "adagrad with a decaying moment")
        .in("Param").in("Grad").in("Moment").in("LearningRate")
        .out("ParamOut").out("MomentOut")
        .attr("decay", 0.95f).check<float>(param_update::unit_check(), "must be in [0, 1]")
        .attr("epsilon", 1.0e-6f).check<float>(param_update::nonneg_check(), "must be >= 0");
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update(c, {"Moment"}); }
  static void eval_cpu(KernelContext&);
};

/// adam (Fluid's kernel): with b1p = Beta1Pow = beta1^t, b2p = Beta2Pow = beta2^t,
///   m1' = beta1 * m1 + (1 - beta1) * g;  m2' = beta2 * m2 + (1 - beta2) * g^2
///   lr_t = lr * sqrt(1 - b2p) / (1 - b1p);  ParamOut = p - lr_t * m1' / (sqrt(m2') + epsilon)
/// Beta1PowOut / Beta2PowOut (optional) = b1p * beta1, b2p * beta2. Fluid 1.x leaves them out and advances the
/// pows with `scale` ops after all updates instead; a program must do one or the other, not both.
/// Grad SelectedRows: duplicate rows are summed first; lazy_mode updates only the listed rows (the others keep
/// p, m1, m2), otherwise every row is updated with g = 0 where no row is listed (Fluid's default).
struct Adam {
  static OpDef def() {
    return OpDef("adam", "adaptive moment estimation step")
        .in("Param").in("Grad").in("LearningRate").in("Moment1").in("Moment2").in("Beta1Pow").in("Beta2Pow")
        .out("ParamOut").out("Moment1Out").out("Moment2Out").out("Beta1PowOut", dispensable).out("Beta2PowOut", dispensable)
        .attr("beta1", 0.9f).check<float>(param_update::beta_check(), "must be in [0, 1)")
        .attr("beta2", 0.999f).check<float>(param_update::beta_check(), "must be in [0, 1)")
        .attr("epsilon", 1.0e-8f).check<float>(param_update::nonneg_check(), "must be >= 0")
        .attr("lazy_mode", false, "SelectedRows Grad: update only the listed rows");
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update(c, {"Moment1", "Moment2"}, {"Beta1Pow", "Beta2Pow"}, true, true); }
  static void eval_cpu(KernelContext&);
};

/// adamw (Paddle 2.x's decoupled weight decay): first p~ = p - lr * coeff * p (the plain lr, not lr_t), then
/// adam's update on p~: ParamOut = p~ - lr_t * m1' / (sqrt(m2') + epsilon), moments and pows as in adam.
/// with_decay = false skips the decay (plain adam). SelectedRows Grad as in adam (decay only where updated).
struct AdamW {
  static OpDef def() {
    return OpDef("adamw", "adam with decoupled weight decay")
        .in("Param").in("Grad").in("LearningRate").in("Moment1").in("Moment2").in("Beta1Pow").in("Beta2Pow")
        .out("ParamOut").out("Moment1Out").out("Moment2Out").out("Beta1PowOut", dispensable).out("Beta2PowOut", dispensable)
        .attr("beta1", 0.9f).check<float>(param_update::beta_check(), "must be in [0, 1)")
        .attr("beta2", 0.999f).check<float>(param_update::beta_check(), "must be in [0, 1)")
        .attr("epsilon", 1.0e-8f).check<float>(param_update::nonneg_check(), "must be >= 0")
        .attr("coeff", 0.01f, "decoupled weight decay coefficient")
        .attr("with_decay", true)
        .attr("lazy_mode", false, "SelectedRows Grad: update only the listed rows");
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update(c, {"Moment1", "Moment2"}, {"Beta1Pow", "Beta2Pow"}, true, true); }
  static void eval_cpu(KernelContext&);
};

/// adamax: with b1p = Beta1Pow = beta1^t,
///   m' = beta1 * m + (1 - beta1) * g;  u' = max(beta2 * u + epsilon, |g|)
///   ParamOut = p - (lr / (1 - b1p)) * m' / u'
/// Beta1PowOut (optional) = b1p * beta1 (Fluid advances it with a `scale` op instead).
struct Adamax {
  static OpDef def() {
    return OpDef("adamax", "adam with the infinity norm")
        .in("Param").in("Grad").in("LearningRate").in("Moment").in("InfNorm").in("Beta1Pow")
        .out("ParamOut").out("MomentOut").out("InfNormOut").out("Beta1PowOut", dispensable)
        .attr("beta1", 0.9f).check<float>(param_update::beta_check(), "must be in [0, 1)")
        .attr("beta2", 0.999f).check<float>(param_update::beta_check(), "must be in [0, 1)")
        .attr("epsilon", 1.0e-8f).check<float>(param_update::nonneg_check(), "must be >= 0");
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update(c, {"Moment", "InfNorm"}, {"Beta1Pow"}); }
  static void eval_cpu(KernelContext&);
};

/// rmsprop (Fluid's kernel; decay is Python's rho):
///   ms' = decay * ms + (1 - decay) * g^2
///   plain:    mom' = momentum * mom + lr * g / sqrt(ms' + epsilon)
///   centered: mg' = decay * mg + (1 - decay) * g;  mom' = momentum * mom + lr * g / sqrt(ms' - mg'^2 + epsilon)
///   ParamOut = p - mom'
/// centered needs MeanGrad and MeanGradOut.
struct Rmsprop {
  static OpDef def() {
    return OpDef("rmsprop", "root-mean-square propagation step")
        .in("Param").in("MeanSquare").in("MeanGrad", dispensable).in("LearningRate").in("Grad").in("Moment")
        .out("ParamOut").out("MomentOut").out("MeanSquareOut").out("MeanGradOut", dispensable)
        .attr("epsilon", 1.0e-6f).check<float>(param_update::nonneg_check(), "must be >= 0")
        .attr("decay", 0.9f).check<float>(param_update::unit_check(), "must be in [0, 1]")
        .attr("momentum", 0.0f)
        .attr("centered", false);
  }
  static void infer_shape(InferShapeContext& c) {
    if (c.attr<bool>("centered"))
      c.check(c.has_input("MeanGrad") && c.has_output("MeanGradOut"), "centered = true needs MeanGrad and MeanGradOut");
    param_update::infer_update(c, {"Moment", "MeanSquare", "MeanGrad"});
  }
  static void eval_cpu(KernelContext&);
};

/// adadelta (no learning rate):
///   Eg' = rho * Eg + (1 - rho) * g^2;  d = -sqrt((Edx + epsilon) / (Eg' + epsilon)) * g
///   Edx' = rho * Edx + (1 - rho) * d^2;  ParamOut = p + d
/// Eg is AvgSquaredGrad, Edx AvgSquaredUpdate.
struct Adadelta {
  static OpDef def() {
    return OpDef("adadelta", "adadelta step")
        .in("Param").in("Grad").in("AvgSquaredGrad").in("AvgSquaredUpdate")
        .out("ParamOut").out("AvgSquaredGradOut").out("AvgSquaredUpdateOut")
        .attr("rho", 0.95f).check<float>(param_update::unit_check(), "must be in [0, 1]")
        .attr("epsilon", 1.0e-6f).check<float>(param_update::nonneg_check(), "must be >= 0");
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update(c, {"AvgSquaredGrad", "AvgSquaredUpdate"}, {}, false); }
  static void eval_cpu(KernelContext&);
};

/// lamb (layer-wise adaptive moments): with b1p = Beta1Pow = beta1^t, b2p = Beta2Pow = beta2^t,
///   m1' = beta1 * m1 + (1 - beta1) * g;  m2' = beta2 * m2 + (1 - beta2) * g^2
///   r = (m1' / (1 - b1p)) / (sqrt(m2' / (1 - b2p)) + epsilon) + weight_decay * p
///   trust = ||p||_2 / ||r||_2 over the whole tensor (1 when either norm is 0)
///   ParamOut = p - lr * trust * r
/// Beta1PowOut / Beta2PowOut (optional) = b1p * beta1, b2p * beta2.
struct Lamb {
  static OpDef def() {
    return OpDef("lamb", "layer-wise adaptive moments step")
        .in("Param").in("Grad").in("LearningRate").in("Moment1").in("Moment2").in("Beta1Pow").in("Beta2Pow")
        .out("ParamOut").out("Moment1Out").out("Moment2Out").out("Beta1PowOut", dispensable).out("Beta2PowOut", dispensable)
        .attr("weight_decay", 0.01f)
        .attr("beta1", 0.9f).check<float>(param_update::beta_check(), "must be in [0, 1)")
        .attr("beta2", 0.999f).check<float>(param_update::beta_check(), "must be in [0, 1)")
        .attr("epsilon", 1.0e-6f).check<float>(param_update::nonneg_check(), "must be >= 0");
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update(c, {"Moment1", "Moment2"}, {"Beta1Pow", "Beta2Pow"}); }
  static void eval_cpu(KernelContext&);
};

}  // namespace oar::ops
