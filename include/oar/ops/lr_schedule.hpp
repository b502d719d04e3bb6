// oar/ops/lr_schedule.hpp: lr_schedule, the learning rate as a function of the step counter: exponential,
// natural_exp, inverse_time, polynomial, piecewise, cosine, noam and linear warmup (Fluid's
// learning_rate_scheduler formulas, one op instead of a small graph of them).
#pragma once
#include <algorithm>
#include <cmath>

#include "oar/ops/op.hpp"

namespace oar::ops {

/// LearningRate [1] = schedule(Step [1]); see `lr_at` for the formulas.
struct LrSchedule {
  static OpDef def() {
    return OpDef("lr_schedule", "learning rate at step Step")
        .in("Step").out("LearningRate")
        .attr("kind", std::string("constant"))
        .check<std::string>([](const std::string& k) {
          for (auto* n : {"constant", "exponential", "natural_exp", "inverse_time", "polynomial", "piecewise", "cosine", "noam", "linear_warmup"})
            if (k == n) return true;
          return false;
        }, "must be one of constant, exponential, natural_exp, inverse_time, polynomial, piecewise, cosine, noam, linear_warmup")
        .attr("learning_rate", 0.01f).attr("decay_steps", 1.0f).attr("decay_rate", 0.5f).attr("staircase", false)
        .attr("end_learning_rate", 0.0001f).attr("power", 1.0f).attr("cycle", false)
        .attr("boundaries", std::vector<float>{}).attr("values", std::vector<float>{})
        .attr("d_model", 512.0f).attr("warmup_steps", 0.0f).attr("start_learning_rate", 0.0f)
        .attr("total_steps", 1.0f);
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(c.shape("Step").numel() == 1, "Step must have one element, got {}", c.shape("Step").str());
    // The schedule's attributes are checked here, when the op is added, rather than at the first run.
    std::string kind = c.attr<std::string>("kind");
    if (kind == "piecewise") {
      auto b = c.attr<std::vector<float>>("boundaries");
      auto v = c.attr<std::vector<float>>("values");
      c.check(!v.empty() && v.size() == b.size() + 1, "piecewise needs one more value than boundaries, got {} values and {} boundaries", v.size(),
              b.size());
      c.check(std::is_sorted(b.begin(), b.end()), "piecewise boundaries must be ascending, got [{}]", fmt::join(b, ", "));
    }
    if (kind == "exponential" || kind == "natural_exp" || kind == "inverse_time" || kind == "polynomial")
      c.check(c.attr<float>("decay_steps") > 0, "{} needs decay_steps > 0, got {}", kind, c.attr<float>("decay_steps"));
    if (kind == "cosine") c.check(c.attr<float>("total_steps") > 0, "cosine needs total_steps > 0, got {}", c.attr<float>("total_steps"));
    if (kind == "noam")
      c.check(c.attr<float>("warmup_steps") > 0 && c.attr<float>("d_model") > 0, "noam needs warmup_steps > 0 and d_model > 0, got {} and {}",
              c.attr<float>("warmup_steps"), c.attr<float>("d_model"));
    c.set_output("LearningRate", Shape{1}, DType::f32);
  }
  /// The formulas (step counts from 0 as Fluid's counter does; noam uses step + 1).
  static double lr_at(const Operator& op, double step) {
    auto f = [&](const char* n) { return double(op.attr<float>(n)); };
    std::string kind = op.attr<std::string>("kind");
    double lr = f("learning_rate"), ds = f("decay_steps"), rate = f("decay_rate");
    double ratio = step / ds;
    if (op.attr<bool>("staircase")) ratio = std::floor(ratio);
    if (kind == "constant") return lr;
    if (kind == "exponential") return lr * std::pow(rate, ratio);             // lr * rate^(step / ds)
    if (kind == "natural_exp") return lr * std::exp(-rate * ratio);           // lr * e^(-rate step / ds)
    if (kind == "inverse_time") return lr / (1 + rate * ratio);               // lr / (1 + rate step / ds)
    if (kind == "polynomial") {  // (lr - end) (1 - min(step, ds) / ds)^power + end; cycle stretches ds
      double end = f("end_learning_rate"), p = f("power"), s = step;
      if (op.attr<bool>("cycle")) ds *= std::max(1.0, std::ceil(s / ds));
      else s = std::min(s, ds);
      return (lr - end) * std::pow(1 - s / ds, p) + end;
    }
    if (kind == "piecewise") {  // values[i] while step < boundaries[i]; values.back() after
      auto b = op.attr<std::vector<float>>("boundaries");
      auto v = op.attr<std::vector<float>>("values");
      for (size_t i = 0; i < b.size(); ++i)
        if (step < b[i]) return v[i];
      return v.back();
    }
    if (kind == "cosine") {  // lr/2 (1 + cos(pi min(step, T) / T))
      double t = f("total_steps");
      return lr * 0.5 * (1 + std::cos(M_PI * std::min(step, t) / t));
    }
    if (kind == "noam") {  // d^-0.5 min(s^-0.5, warmup^-1.5 s), s = step + 1
      double s = step + 1, w = f("warmup_steps");
      return lr * std::pow(f("d_model"), -0.5) * std::min(std::pow(s, -0.5), std::pow(w, -1.5) * s);
    }
    // linear_warmup: start -> lr over warmup_steps, then lr
    double w = f("warmup_steps"), start = f("start_learning_rate");
    return step < w ? start + (lr - start) * step / w : lr;
  }
  static void eval_cpu(KernelContext& c);  // kernels/cpu/lr_schedule.hpp
};

}  // namespace oar::ops
