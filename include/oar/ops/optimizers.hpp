// oar/ops/optimizers.hpp: the parameter update ops (sgd, momentum, adagrad, decayed_adagrad, adam, adamw, adamax,
// rmsprop, adadelta, lamb) that an optimizer appends after the backward pass. None has a gradient. Kernels:
// kernels/cpu/optimizers.hpp.
#pragma once
#include <span>
#include <array>

#include "oar/ops/op.hpp"

namespace oar::ops {

// Conventions shared by every op here (Fluid's):
// - inputs Param, Grad, LearningRate ([1], f32 or f64 whatever Param's dtype) plus per-parameter accumulators of
//   Param's shape (Moment, Velocity, ...) and [1] scalars (Beta1Pow, ...); outputs ParamOut and `<acc>Out` for
//   each accumulator. In a training program ParamOut IS Param (the same variable), MomentOut IS Moment, etc.:
//   the kernels read and write element by element, so an output may be the same tensor as its input.
// - Each op lists its accumulators in `accumulators` (param_update::Accumulator): shape inference checks them
//   and optimizer code (optim/optimizer.hpp) creates and wires them from that list alone.
// - t below is the step count as seen through the Beta pow inputs: Beta1Pow = beta1^t (Fluid initialises it to
//   beta1, so the first step has t = 1).
// - Grad may be SelectedRows (sparse rows) for sgd, adam and adamw only.
// - SkipUpdate (optional, every op here): a one-value bool tensor on the op's place. When it holds true the op
//   changes nothing: each output keeps (or, out of place, receives) its input's value, the running powers
//   included. Mixed-precision training passes its overflow flag here, so that a step with an inf or NaN
//   gradient is skipped on the device, without the host reading the flag (Paddle 2's SkipUpdate of adam).

namespace param_update {

/// One accumulator of an update op: the input it is read from and the output it is written back through (a
/// training program passes the same variable to both); whether it has Param's shape or holds one value; how
/// optimizer code initialises it: to `init`, or, when `init_attr` names an attribute, to the op's value of it
/// (Beta1Pow starts at beta1). When `only_if` names a bool attribute the accumulator exists only while that
/// attribute is true (rmsprop's MeanGrad, read only when centered).
struct Accumulator {
  enum class Extent : uint8_t { param, scalar };
  Slot in, out;
  Extent extent = Extent::param;
  double init = 0;
  Attr<float> init_attr{};
  Attr<bool> only_if{};
};

/// An accumulator of Param's shape starting at 0 (Moment, Velocity, ...).
constexpr Accumulator param_shaped(Slot in, Slot out, Attr<bool> only_if = {}) { return {in, out, Accumulator::Extent::param, 0, {}, only_if}; }
/// A [1] accumulator starting at the op's value of `init` (Beta1Pow starts at beta1).
constexpr Accumulator scalar_from(Slot in, Slot out, Attr<float> init) { return {in, out, Accumulator::Extent::scalar, 0, init, {}}; }

/// An op without accumulators (sgd).
using NoAccumulators = std::array<Accumulator, 0>;

/// The optional input of every update op that turns its step off (the file comment's SkipUpdate).
inline constexpr Slot skip_update{"SkipUpdate"};

inline bool is_sparse_grad(const InferShapeContext& c, Slot grad) { return c.input_var(grad).kind() == VarKind::selected_rows; }

inline bool shapes_match(const Shape& a, const Shape& b) {
  if (a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i)
    if (!dims_compatible(a[i], b[i])) return false;
  return true;
}

/// Shape inference of update op `Op`: Grad (when dense) and each accumulator of Param's extent have Param's
/// shape and dtype (one that is absent is skipped: rmsprop's MeanGrad); LearningRate (when the op has one) and
/// each scalar accumulator hold one value. ParamOut takes Param's shape and dtype, each accumulator's output
/// (when asked for) its accumulator's.
template <class Op>
void infer_update(InferShapeContext& c, bool sparse_ok = false) {
  const Shape& p = c.shape(Op::param);
  DType t = c.dtype(Op::param);
  c.check(t == DType::f32 || t == DType::f64, "Param must be float32 or float64, got {}", name(t));
  if (is_sparse_grad(c, Op::grad)) {
    c.check(sparse_ok, "Grad is SelectedRows, but {} takes dense gradients only", c.op().type());
  } else {
    c.check(shapes_match(c.shape(Op::grad), p), "Grad {} must have Param's shape {}", c.shape(Op::grad).str(), p.str());
  }
  c.check(c.dtype(Op::grad) == t, "Grad is {} but Param is {}", name(c.dtype(Op::grad)), name(t));
  auto check_scalar = [&](Slot slot) {
    int64_t n = c.shape(slot).numel();
    c.check(n < 0 || n == 1, "{} must hold one value, got shape {}", slot.name, c.shape(slot).str());
    DType st = c.dtype(slot);
    c.check(st == DType::f32 || st == DType::f64, "{} must be float32 or float64, got {}", slot.name, name(st));
  };
  if constexpr (requires { Op::learning_rate; }) check_scalar(Op::learning_rate);
  if (c.has_input(skip_update)) {
    const int64_t n = c.shape(skip_update).numel();
    c.check(n < 0 || n == 1, "SkipUpdate must hold one value, got shape {}", c.shape(skip_update).str());
    c.check(c.dtype(skip_update) == DType::boolean, "SkipUpdate must be bool, got {}", name(c.dtype(skip_update)));
  }
  c.set_output(Op::param_out, p, t);
  for (const Accumulator& a : Op::accumulators) {
    if (a.extent != Accumulator::Extent::param) continue;
    if (!c.has_input(a.in)) continue;  // a dispensable accumulator (rmsprop's MeanGrad)
    c.check(shapes_match(c.shape(a.in), p), "{} {} must have Param's shape {}", a.in.name, c.shape(a.in).str(), p.str());
    c.check(c.dtype(a.in) == t, "{} is {} but Param is {}", a.in.name, name(c.dtype(a.in)), name(t));
    c.set_output(a.out, c.shape(a.in), t);
  }
  for (const Accumulator& a : Op::accumulators) {
    if (a.extent != Accumulator::Extent::scalar) continue;
    check_scalar(a.in);
    c.set_output(a.out, c.shape(a.in), c.dtype(a.in));
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
  static constexpr std::string_view type = "sgd";
  static constexpr Slot param{"Param"}, grad{"Grad"}, learning_rate{"LearningRate"}, param_out{"ParamOut"};
  static constexpr param_update::NoAccumulators accumulators{};

  static OpDef def() {
    return OpDef(type, "stochastic gradient descent step").in(param).in(grad).in(learning_rate).in(param_update::skip_update, dispensable).out(param_out);
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update<Sgd>(c, true); }
  static void eval_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/optimizers.hpp
  static void eval_cuda(KernelContext&, const NoAttrs&);  // kernels/cuda/optim.hpp
  static void eval_cuda_group(std::span<KernelContext* const>, const NoAttrs&);  // kernels/cuda/optim.hpp: one launch for many
};

/// momentum: v' = mu * v + g; ParamOut = p - lr * v', or with use_nesterov p - lr * (g + mu * v').
struct Momentum {
  static constexpr std::string_view type = "momentum";
  static constexpr Slot param{"Param"}, grad{"Grad"}, velocity{"Velocity"}, learning_rate{"LearningRate"};
  static constexpr Slot param_out{"ParamOut"}, velocity_out{"VelocityOut"};
  static constexpr Attr<float> mu{"mu"};
  static constexpr Attr<bool> use_nesterov{"use_nesterov"};
  static constexpr std::array accumulators{param_update::param_shaped(velocity, velocity_out)};

  struct Attrs {
    float mu;
    bool use_nesterov;
    explicit Attrs(const AttrReader& r) : mu(r(Momentum::mu)), use_nesterov(r(Momentum::use_nesterov)) {}
  };

  static OpDef def() {
    return OpDef(type, "momentum (heavy-ball or Nesterov) step")
        .in(param).in(grad).in(velocity).in(learning_rate)
        .in(param_update::skip_update, dispensable)
        .out(param_out).out(velocity_out)
        .required_attr(mu, "momentum coefficient")
        .attr(use_nesterov, false);
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update<Momentum>(c); }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/optimizers.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/optim.hpp
  static void eval_cuda_group(std::span<KernelContext* const>, const Attrs&);  // kernels/cuda/optim.hpp: one launch for many
};

/// adagrad: m' = m + g^2; ParamOut = p - lr * g / (sqrt(m') + epsilon).
struct Adagrad {
  static constexpr std::string_view type = "adagrad";
  static constexpr Slot param{"Param"}, grad{"Grad"}, moment{"Moment"}, learning_rate{"LearningRate"};
  static constexpr Slot param_out{"ParamOut"}, moment_out{"MomentOut"};
  static constexpr Attr<float> epsilon{"epsilon"};
  static constexpr std::array accumulators{param_update::param_shaped(moment, moment_out)};

  struct Attrs {
    float epsilon;
    explicit Attrs(const AttrReader& r) : epsilon(r(Adagrad::epsilon)) {}
  };

  static OpDef def() {
    return OpDef(type, "adaptive gradient step")
        .in(param).in(grad).in(moment).in(learning_rate)
        .in(param_update::skip_update, dispensable)
        .out(param_out).out(moment_out)
        .attr(epsilon, 1.0e-6f).check<float>(param_update::nonneg_check(), "must be >= 0");
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update<Adagrad>(c); }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/optimizers.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/optim.hpp
  static void eval_cuda_group(std::span<KernelContext* const>, const Attrs&);  // kernels/cuda/optim.hpp: one launch for many
};

/// decayed_adagrad: m' = decay * m + (1 - decay) * g^2; ParamOut = p - lr * g / (sqrt(m') + epsilon).
struct DecayedAdagrad {
  static constexpr std::string_view type = "decayed_adagrad";
  static constexpr Slot param{"Param"}, grad{"Grad"}, moment{"Moment"}, learning_rate{"LearningRate"};
  static constexpr Slot param_out{"ParamOut"}, moment_out{"MomentOut"};
  static constexpr Attr<float> decay{"decay"}, epsilon{"epsilon"};
  static constexpr std::array accumulators{param_update::param_shaped(moment, moment_out)};

  struct Attrs {
    float decay, epsilon;
    explicit Attrs(const AttrReader& r) : decay(r(DecayedAdagrad::decay)), epsilon(r(DecayedAdagrad::epsilon)) {}
  };

  static OpDef def() {
    return OpDef(type, "adagrad with a decaying moment")
        .in(param).in(grad).in(moment).in(learning_rate)
        .in(param_update::skip_update, dispensable)
        .out(param_out).out(moment_out)
        .attr(decay, 0.95f).check<float>(param_update::unit_check(), "must be in [0, 1]")
        .attr(epsilon, 1.0e-6f).check<float>(param_update::nonneg_check(), "must be >= 0");
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update<DecayedAdagrad>(c); }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/optimizers.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/optim.hpp
  static void eval_cuda_group(std::span<KernelContext* const>, const Attrs&);  // kernels/cuda/optim.hpp: one launch for many
};

/// adam (Fluid's kernel): with b1p = Beta1Pow = beta1^t, b2p = Beta2Pow = beta2^t,
///   m1' = beta1 * m1 + (1 - beta1) * g;  m2' = beta2 * m2 + (1 - beta2) * g^2
///   lr_t = lr * sqrt(1 - b2p) / (1 - b1p);  ParamOut = p - lr_t * m1' / (sqrt(m2') + epsilon)
/// Beta1PowOut / Beta2PowOut (optional) = b1p * beta1, b2p * beta2. Fluid 1.x leaves them out and advances the
/// pows with `scale` ops after all updates instead; a program must do one or the other, not both.
/// Grad SelectedRows: duplicate rows are summed first; lazy_mode updates only the listed rows (the others keep
/// p, m1, m2), otherwise every row is updated with g = 0 where no row is listed (Fluid's default).
struct Adam {
  static constexpr std::string_view type = "adam";
  static constexpr Slot param{"Param"}, grad{"Grad"}, learning_rate{"LearningRate"}, moment1{"Moment1"}, moment2{"Moment2"},
      beta1_pow{"Beta1Pow"}, beta2_pow{"Beta2Pow"};
  static constexpr Slot param_out{"ParamOut"}, moment1_out{"Moment1Out"}, moment2_out{"Moment2Out"}, beta1_pow_out{"Beta1PowOut"},
      beta2_pow_out{"Beta2PowOut"};
  static constexpr Attr<float> beta1{"beta1"}, beta2{"beta2"}, epsilon{"epsilon"};
  static constexpr Attr<bool> lazy_mode{"lazy_mode"};
  static constexpr std::array accumulators{param_update::param_shaped(moment1, moment1_out), param_update::param_shaped(moment2, moment2_out),
                                           param_update::scalar_from(beta1_pow, beta1_pow_out, beta1),
                                           param_update::scalar_from(beta2_pow, beta2_pow_out, beta2)};

  struct Attrs {
    float beta1, beta2, epsilon;
    bool lazy_mode;
    explicit Attrs(const AttrReader& r) : beta1(r(Adam::beta1)), beta2(r(Adam::beta2)), epsilon(r(Adam::epsilon)), lazy_mode(r(Adam::lazy_mode)) {}
  };

  static OpDef def() { return with_adam_slots(OpDef(type, "adaptive moment estimation step")).attr(lazy_mode, false, kLazyMode); }
  /// Adam's slots and its attributes but lazy_mode, which comes last (AdamW's attributes come before it).
  static OpDef with_adam_slots(OpDef d) {
    return d.in(param).in(grad).in(learning_rate).in(moment1).in(moment2).in(beta1_pow).in(beta2_pow)
        .in(param_update::skip_update, dispensable)
        .out(param_out).out(moment1_out).out(moment2_out).out(beta1_pow_out, dispensable).out(beta2_pow_out, dispensable)
        .attr(beta1, 0.9f).check<float>(param_update::beta_check(), "must be in [0, 1)")
        .attr(beta2, 0.999f).check<float>(param_update::beta_check(), "must be in [0, 1)")
        .attr(epsilon, 1.0e-8f).check<float>(param_update::nonneg_check(), "must be >= 0");
  }
  static constexpr const char* kLazyMode = "SelectedRows Grad: update only the listed rows";
  static void infer_shape(InferShapeContext& c) { param_update::infer_update<Adam>(c, true); }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/optimizers.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/optim.hpp
  static void eval_cuda_group(std::span<KernelContext* const>, const Attrs&);  // kernels/cuda/optim.hpp: one launch for many
};

/// adamw (Paddle 2.x's decoupled weight decay): first p~ = p - lr * coeff * p (the plain lr, not lr_t), then
/// adam's update on p~: ParamOut = p~ - lr_t * m1' / (sqrt(m2') + epsilon), moments and pows as in adam.
/// with_decay = false skips the decay (plain adam). SelectedRows Grad as in adam (decay only where updated).
struct AdamW : Adam {  // Adam's slots, attributes and accumulators, and two attributes more
  static constexpr std::string_view type = "adamw";
  static constexpr Attr<float> coeff{"coeff"};
  static constexpr Attr<bool> with_decay{"with_decay"};

  struct Attrs : Adam::Attrs {
    float coeff;
    bool with_decay;
    explicit Attrs(const AttrReader& r) : Adam::Attrs(r), coeff(r(AdamW::coeff)), with_decay(r(AdamW::with_decay)) {}
  };

  static OpDef def() {
    return with_adam_slots(OpDef(type, "adam with decoupled weight decay"))
        .attr(coeff, 0.01f, "decoupled weight decay coefficient")
        .attr(with_decay, true)
        .attr(lazy_mode, false, kLazyMode);
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update<AdamW>(c, true); }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/optimizers.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/optim.hpp
  static void eval_cuda_group(std::span<KernelContext* const>, const Attrs&);  // kernels/cuda/optim.hpp: one launch for many
};

/// adamax: with b1p = Beta1Pow = beta1^t,
///   m' = beta1 * m + (1 - beta1) * g;  u' = max(beta2 * u + epsilon, |g|)
///   ParamOut = p - (lr / (1 - b1p)) * m' / u'
/// Beta1PowOut (optional) = b1p * beta1 (Fluid advances it with a `scale` op instead).
struct Adamax {
  static constexpr std::string_view type = "adamax";
  static constexpr Slot param{"Param"}, grad{"Grad"}, learning_rate{"LearningRate"}, moment{"Moment"}, inf_norm{"InfNorm"},
      beta1_pow{"Beta1Pow"};
  static constexpr Slot param_out{"ParamOut"}, moment_out{"MomentOut"}, inf_norm_out{"InfNormOut"}, beta1_pow_out{"Beta1PowOut"};
  static constexpr Attr<float> beta1{"beta1"}, beta2{"beta2"}, epsilon{"epsilon"};
  static constexpr std::array accumulators{param_update::param_shaped(moment, moment_out), param_update::param_shaped(inf_norm, inf_norm_out),
                                           param_update::scalar_from(beta1_pow, beta1_pow_out, beta1)};

  struct Attrs {
    float beta1, beta2, epsilon;
    explicit Attrs(const AttrReader& r) : beta1(r(Adamax::beta1)), beta2(r(Adamax::beta2)), epsilon(r(Adamax::epsilon)) {}
  };

  static OpDef def() {
    return OpDef(type, "adam with the infinity norm")
        .in(param).in(grad).in(learning_rate).in(moment).in(inf_norm).in(beta1_pow)
        .in(param_update::skip_update, dispensable)
        .out(param_out).out(moment_out).out(inf_norm_out).out(beta1_pow_out, dispensable)
        .attr(beta1, 0.9f).check<float>(param_update::beta_check(), "must be in [0, 1)")
        .attr(beta2, 0.999f).check<float>(param_update::beta_check(), "must be in [0, 1)")
        .attr(epsilon, 1.0e-8f).check<float>(param_update::nonneg_check(), "must be >= 0");
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update<Adamax>(c); }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/optimizers.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/optim.hpp
  static void eval_cuda_group(std::span<KernelContext* const>, const Attrs&);  // kernels/cuda/optim.hpp: one launch for many
};

/// rmsprop (Fluid's kernel; decay is Python's rho):
///   ms' = decay * ms + (1 - decay) * g^2
///   plain:    mom' = momentum * mom + lr * g / sqrt(ms' + epsilon)
///   centered: mg' = decay * mg + (1 - decay) * g;  mom' = momentum * mom + lr * g / sqrt(ms' - mg'^2 + epsilon)
///   ParamOut = p - mom'
/// centered needs MeanGrad and MeanGradOut.
struct Rmsprop {
  static constexpr std::string_view type = "rmsprop";
  static constexpr Slot param{"Param"}, mean_square{"MeanSquare"}, mean_grad{"MeanGrad"}, learning_rate{"LearningRate"}, grad{"Grad"},
      moment{"Moment"};
  static constexpr Slot param_out{"ParamOut"}, moment_out{"MomentOut"}, mean_square_out{"MeanSquareOut"}, mean_grad_out{"MeanGradOut"};
  static constexpr Attr<float> epsilon{"epsilon"}, decay{"decay"}, momentum{"momentum"};
  static constexpr Attr<bool> centered{"centered"};
  static constexpr std::array accumulators{param_update::param_shaped(moment, moment_out), param_update::param_shaped(mean_square, mean_square_out),
                                           param_update::param_shaped(mean_grad, mean_grad_out, centered)};

  struct Attrs {
    float epsilon, decay, momentum;
    bool centered;
    explicit Attrs(const AttrReader& r)
        : epsilon(r(Rmsprop::epsilon)), decay(r(Rmsprop::decay)), momentum(r(Rmsprop::momentum)), centered(r(Rmsprop::centered)) {}
  };

  static OpDef def() {
    return OpDef(type, "root-mean-square propagation step")
        .in(param).in(mean_square).in(mean_grad, dispensable).in(learning_rate).in(grad).in(moment)
        .in(param_update::skip_update, dispensable)
        .out(param_out).out(moment_out).out(mean_square_out).out(mean_grad_out, dispensable)
        .attr(epsilon, 1.0e-6f).check<float>(param_update::nonneg_check(), "must be >= 0")
        .attr(decay, 0.9f).check<float>(param_update::unit_check(), "must be in [0, 1]")
        .attr(momentum, 0.0f)
        .attr(centered, false);
  }
  static void infer_shape(InferShapeContext& c) {
    if (c.attr(centered))
      c.check(c.has_input(mean_grad) && c.has_output(mean_grad_out), "centered = true needs MeanGrad and MeanGradOut");
    param_update::infer_update<Rmsprop>(c);
  }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/optimizers.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/optim.hpp
  static void eval_cuda_group(std::span<KernelContext* const>, const Attrs&);  // kernels/cuda/optim.hpp: one launch for many
};

/// adadelta (no learning rate):
///   Eg' = rho * Eg + (1 - rho) * g^2;  d = -sqrt((Edx + epsilon) / (Eg' + epsilon)) * g
///   Edx' = rho * Edx + (1 - rho) * d^2;  ParamOut = p + d
/// Eg is AvgSquaredGrad, Edx AvgSquaredUpdate.
struct Adadelta {
  static constexpr std::string_view type = "adadelta";
  static constexpr Slot param{"Param"}, grad{"Grad"}, avg_squared_grad{"AvgSquaredGrad"}, avg_squared_update{"AvgSquaredUpdate"};
  static constexpr Slot param_out{"ParamOut"}, avg_squared_grad_out{"AvgSquaredGradOut"}, avg_squared_update_out{"AvgSquaredUpdateOut"};
  static constexpr Attr<float> rho{"rho"}, epsilon{"epsilon"};
  static constexpr std::array accumulators{param_update::param_shaped(avg_squared_grad, avg_squared_grad_out),
                                           param_update::param_shaped(avg_squared_update, avg_squared_update_out)};

  struct Attrs {
    float rho, epsilon;
    explicit Attrs(const AttrReader& r) : rho(r(Adadelta::rho)), epsilon(r(Adadelta::epsilon)) {}
  };

  static OpDef def() {
    return OpDef(type, "adadelta step")
        .in(param).in(grad).in(avg_squared_grad).in(avg_squared_update)
        .in(param_update::skip_update, dispensable)
        .out(param_out).out(avg_squared_grad_out).out(avg_squared_update_out)
        .attr(rho, 0.95f).check<float>(param_update::unit_check(), "must be in [0, 1]")
        .attr(epsilon, 1.0e-6f).check<float>(param_update::nonneg_check(), "must be >= 0");
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update<Adadelta>(c); }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/optimizers.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/optim.hpp
  static void eval_cuda_group(std::span<KernelContext* const>, const Attrs&);  // kernels/cuda/optim.hpp: one launch for many
};

/// lamb (layer-wise adaptive moments): with b1p = Beta1Pow = beta1^t, b2p = Beta2Pow = beta2^t,
///   m1' = beta1 * m1 + (1 - beta1) * g;  m2' = beta2 * m2 + (1 - beta2) * g^2
///   r = (m1' / (1 - b1p)) / (sqrt(m2' / (1 - b2p)) + epsilon) + weight_decay * p
///   trust = ||p||_2 / ||r||_2 over the whole tensor (1 when either norm is 0)
///   ParamOut = p - lr * trust * r
/// Beta1PowOut / Beta2PowOut (optional) = b1p * beta1, b2p * beta2.
struct Lamb {
  static constexpr std::string_view type = "lamb";
  static constexpr Slot param{"Param"}, grad{"Grad"}, learning_rate{"LearningRate"}, moment1{"Moment1"}, moment2{"Moment2"},
      beta1_pow{"Beta1Pow"}, beta2_pow{"Beta2Pow"};
  static constexpr Slot param_out{"ParamOut"}, moment1_out{"Moment1Out"}, moment2_out{"Moment2Out"}, beta1_pow_out{"Beta1PowOut"},
      beta2_pow_out{"Beta2PowOut"};
  static constexpr Attr<float> weight_decay{"weight_decay"}, beta1{"beta1"}, beta2{"beta2"}, epsilon{"epsilon"};
  static constexpr std::array accumulators{param_update::param_shaped(moment1, moment1_out), param_update::param_shaped(moment2, moment2_out),
                                           param_update::scalar_from(beta1_pow, beta1_pow_out, beta1),
                                           param_update::scalar_from(beta2_pow, beta2_pow_out, beta2)};

  struct Attrs {
    float weight_decay, beta1, beta2, epsilon;
    explicit Attrs(const AttrReader& r)
        : weight_decay(r(Lamb::weight_decay)), beta1(r(Lamb::beta1)), beta2(r(Lamb::beta2)), epsilon(r(Lamb::epsilon)) {}
  };

  static OpDef def() {
    return OpDef(type, "layer-wise adaptive moments step")
        .in(param).in(grad).in(learning_rate).in(moment1).in(moment2).in(beta1_pow).in(beta2_pow)
        .in(param_update::skip_update, dispensable)
        .out(param_out).out(moment1_out).out(moment2_out).out(beta1_pow_out, dispensable).out(beta2_pow_out, dispensable)
        .attr(weight_decay, 0.01f)
        .attr(beta1, 0.9f).check<float>(param_update::beta_check(), "must be in [0, 1)")
        .attr(beta2, 0.999f).check<float>(param_update::beta_check(), "must be in [0, 1)")
        .attr(epsilon, 1.0e-6f).check<float>(param_update::nonneg_check(), "must be >= 0");
  }
  static void infer_shape(InferShapeContext& c) { param_update::infer_update<Lamb>(c); }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/optimizers.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/optim.hpp
  static void eval_cuda_group(std::span<KernelContext* const>, const Attrs&);  // kernels/cuda/optim.hpp: one launch for many
};

}  // namespace oar::ops
