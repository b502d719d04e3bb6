// oar/ops/lr_formula.hpp: the learning-rate schedules of lr_schedule as one host+device function and nothing
// else (no ir header), so that its CPU kernel and its CUDA kernel (which nvcc compiles without the ir headers)
// evaluate the same formulas.
#pragma once
#include <cmath>
#include <cstdint>

#include "oar/config.hpp"

namespace oar::ops {

/// The schedules, in the order of LrSchedule::kind_names.
enum class LrKind : uint8_t { constant, exponential, natural_exp, inverse_time, polynomial, piecewise, cosine, noam, linear_warmup };

/// A schedule's parameters; `boundaries` (`pieces` of them) and `values` (pieces + 1) only for piecewise.
struct LrFormula {
  LrKind kind = LrKind::constant;
  float learning_rate = 0, decay_steps = 1, decay_rate = 0, end_learning_rate = 0, power = 1, d_model = 1, warmup_steps = 0,
        start_learning_rate = 0, total_steps = 1;
  bool staircase = false, cycle = false;
  int pieces = 0;
  const float* boundaries = nullptr;
  const float* values = nullptr;

  /// The learning rate at step `at` (counting from 0, as Fluid's counter does; noam uses at + 1).
  OAR_HD double at(double at) const {
    const double lr = learning_rate, rate = decay_rate;
    double ds = decay_steps, ratio = at / ds;
    if (staircase) ratio = std::floor(ratio);
    switch (kind) {
      case LrKind::constant: return lr;
      case LrKind::exponential: return lr * std::pow(rate, ratio);    // lr * rate^(step / ds)
      case LrKind::natural_exp: return lr * std::exp(-rate * ratio);  // lr * e^(-rate step / ds)
      case LrKind::inverse_time: return lr / (1 + rate * ratio);      // lr / (1 + rate step / ds)
      case LrKind::polynomial: {  // (lr - end) (1 - min(step, ds) / ds)^power + end; cycle stretches ds
        double s = at;
        if (cycle) ds *= std::fmax(1.0, std::ceil(s / ds));
        else s = std::fmin(s, ds);
        return (lr - end_learning_rate) * std::pow(1 - s / ds, double(power)) + end_learning_rate;
      }
      case LrKind::piecewise: {  // values[i] while step < boundaries[i]; values[pieces] after
        for (int i = 0; i < pieces; ++i)
          if (at < boundaries[i]) return values[i];
        return values[pieces];
      }
      case LrKind::cosine: {  // lr (step + 1) / W while step < W; then lr/2 (1 + cos(pi min(s, T - W) / (T - W))), s = step - W
        const double w = warmup_steps, t = total_steps - w;
        if (at < w) return lr * (at + 1) / w;
        return lr * 0.5 * (1 + std::cos(3.14159265358979323846 * std::fmin(at - w, t) / t));
      }
      case LrKind::noam: {  // d^-0.5 min(s^-0.5, warmup^-1.5 s), s = step + 1
        const double s = at + 1, w = warmup_steps;
        return lr * std::pow(double(d_model), -0.5) * std::fmin(std::pow(s, -0.5), std::pow(w, -1.5) * s);
      }
      case LrKind::linear_warmup: break;
    }
    // linear_warmup: start -> lr over warmup_steps, then lr
    const double w = warmup_steps, start = start_learning_rate;
    return at < w ? start + (lr - start) * at / w : lr;
  }
};

}  // namespace oar::ops
