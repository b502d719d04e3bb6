// oar/optim/optimizer.hpp: update rules (sgd, momentum, adagrad, decayed_adagrad, adam, adamw, adamax,
// rmsprop, adadelta, lamb) and `append_update`, which appends clipping, regularization, the learning rate
// (with its schedule) and one update op per parameter, with the accumulators that op declares (its
// `accumulators`, ops/optimizers.hpp) as persistable globals.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "oar/autodiff/backward.hpp"
#include "oar/config.hpp"
#include "oar/ops/param_attr.hpp"
#include "oar/optim/clip.hpp"
#include "oar/optim/mixed_precision.hpp"
#include "oar/optim/regularizer.hpp"

namespace oar::optim {

/// A learning-rate schedule over the step counter (a persistable variable: it checkpoints).
struct Schedule {
  std::string kind = "constant";
  std::map<std::string, Attribute> attrs;
};
/// lr * rate^(step / decay_steps) (floor of the exponent with staircase)
Schedule exponential_decay(double decay_steps, double decay_rate, bool staircase = false);
/// lr * e^(-rate * step / decay_steps)
Schedule natural_exp_decay(double decay_steps, double decay_rate, bool staircase = false);
/// lr / (1 + rate * step / decay_steps)
Schedule inverse_time_decay(double decay_steps, double decay_rate, bool staircase = false);
/// (lr - end) (1 - min(step, decay_steps) / decay_steps)^power + end
Schedule polynomial_decay(double decay_steps, double end_lr = 1e-4, double power = 1.0, bool cycle = false);
/// values[i] while step < boundaries[i], values.back() afterwards
Schedule piecewise_decay(std::vector<float> boundaries, std::vector<float> values);
/// lr / 2 (1 + cos(pi min(step, total) / total)); with warmup W, first a linear rise lr (step + 1) / W over W
/// steps, then the cosine over the remaining total - W (the usual schedule of a Transformer trained with Adam)
Schedule cosine_decay(double total_steps, double warmup_steps = 0);
/// lr d_model^-0.5 min(s^-0.5, warmup^-1.5 s), s = step + 1
Schedule noam_decay(double d_model, double warmup_steps);
/// start + (lr - start) step / warmup_steps, then lr
Schedule linear_warmup(double warmup_steps, double start_lr = 0);

/// An update rule: the op type, the learning rate, the op's attributes, and options shared by all parameters.
struct Rule {
  std::string type;
  double learning_rate = 0.01;
  std::map<std::string, Attribute> attrs;
  std::optional<Schedule> schedule;
  std::optional<Regularizer> regularization;  ///< for parameters without their own
  std::optional<GradientClip> clip;           ///< for parameters without their own
  std::optional<MixedPrecision> mixed_precision;  ///< 16-bit products and convolutions with loss scaling (mixed_precision.hpp)

  Rule& with_schedule(Schedule s) { schedule = std::move(s); return *this; }
  /// Trains in mixed precision (on a GPU; on the CPU the loss scaling alone, the math staying f32).
  Rule& with_mixed_precision(MixedPrecision m = {}) { mixed_precision = m; return *this; }
  Rule& with_regularization(Regularizer r) { regularization = r; return *this; }
  Rule& with_clip(GradientClip c) { clip = c; return *this; }
};

/// p -= lr g
Rule sgd(double lr);
/// v = mu v + g; p -= lr v (Nesterov: p -= lr (g + mu v))
Rule momentum(double lr, double mu = 0.9, bool nesterov = false);
/// m += g^2; p -= lr g / (sqrt(m) + eps)
Rule adagrad(double lr, double epsilon = 1e-6);
/// m = decay m + (1 - decay) g^2; p -= lr g / (sqrt(m) + eps)
Rule decayed_adagrad(double lr, double decay = 0.95, double epsilon = 1e-6);
/// Adam (Kingma and Ba) with bias correction in the step size.
Rule adam(double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999, double epsilon = 1e-8);
/// Adam with decoupled weight decay `coeff`.
Rule adamw(double lr = 1e-3, double coeff = 0.01, double beta1 = 0.9, double beta2 = 0.999, double epsilon = 1e-8);
/// Adam with the infinity norm.
Rule adamax(double lr = 2e-3, double beta1 = 0.9, double beta2 = 0.999, double epsilon = 1e-8);
/// ms = rho ms + (1 - rho) g^2; mom = momentum mom + lr g / sqrt(ms + eps); p -= mom (centered: ms - mg^2)
Rule rmsprop(double lr, double rho = 0.95, double epsilon = 1e-6, double momentum = 0.0, bool centered = false);
/// Adadelta (no learning rate).
Rule adadelta(double rho = 0.95, double epsilon = 1e-6);
/// LAMB: Adam direction plus weight decay, scaled by the trust ratio |p| / |r|.
Rule lamb(double lr = 1e-3, double weight_decay = 0.01, double beta1 = 0.9, double beta2 = 0.999, double epsilon = 1e-6);

/// The name of the step counter of learning-rate schedules.
inline constexpr const char* kStepCounter = "@LR_DECAY_COUNTER@";

/// Appends to block `block` of `main` (the global block by default): clipping, regularization (in Fluid's order), the learning
/// rate (and its schedule step), and the update op of `rule` for every (param, grad). Accumulators are persistable globals
/// named `<param>.<slot>` initialized in `startup`. Returns the name of the learning-rate variable. (The rule's
/// mixed_precision is not applied here: see append_scaled_update.) `skip`, when given, names a one-value bool
/// variable that turns the step off on the device: every update op reads it as its SkipUpdate, and the schedule's
/// step counter advances by 1 only when it is false.
std::string append_update(Program& main, Program& startup, const Rule& rule, const std::vector<ParamGrad>& params_grads, int block = 0,
                          const std::string& skip = {});

}  // namespace oar::optim

#if OAR_HEADER_ONLY
#include "oar/optim/optimizer-inl.hpp"
#endif
