// oar/ops/lr_schedule.hpp: lr_schedule, the learning rate as a function of the step counter: exponential,
// natural_exp, inverse_time, polynomial, piecewise, cosine, noam and linear warmup (Fluid's
// learning_rate_scheduler formulas, one op instead of a small graph of them).
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <optional>

#include "oar/ops/lr_formula.hpp"
#include "oar/ops/op.hpp"

namespace oar::ops {

/// LearningRate [1] = schedule(Step [1]); see `lr_at` for the formulas.
struct LrSchedule {
  static constexpr std::string_view type = "lr_schedule";
  static constexpr Slot step{"Step"}, learning_rate{"LearningRate"};
  static constexpr Attr<std::string> kind{"kind"};
  // `learning_rate` names the output slot, so the attribute of that name is `learning_rate_attr`.
  static constexpr Attr<float> learning_rate_attr{"learning_rate"}, decay_steps{"decay_steps"}, decay_rate{"decay_rate"},
      end_learning_rate{"end_learning_rate"}, power{"power"}, d_model{"d_model"}, warmup_steps{"warmup_steps"},
      start_learning_rate{"start_learning_rate"}, total_steps{"total_steps"};
  static constexpr Attr<bool> staircase{"staircase"}, cycle{"cycle"};
  static constexpr Attr<std::vector<float>> boundaries{"boundaries"}, values{"values"};

  /// The values of `kind`, in the order of `kind_names`.
  using Kind = LrKind;
  static constexpr std::array<std::string_view, 9> kind_names{"constant", "exponential", "natural_exp", "inverse_time", "polynomial",
                                                              "piecewise", "cosine", "noam", "linear_warmup"};
  static std::optional<Kind> find_kind(std::string_view k) {
    for (size_t i = 0; i < kind_names.size(); ++i)
      if (k == kind_names[i]) return Kind(i);
    return std::nullopt;
  }

  /// What the kernel reads, decoded once when a program is prepared (`kind` checked here).
  struct Attrs {
    Kind kind;
    float learning_rate, decay_steps, decay_rate, end_learning_rate, power, d_model, warmup_steps, start_learning_rate, total_steps;
    bool staircase, cycle;
    std::vector<float> boundaries, values;
    explicit Attrs(const AttrReader& r)
        : kind(decode_kind(r)),
          learning_rate(r(LrSchedule::learning_rate_attr)),
          decay_steps(r(LrSchedule::decay_steps)),
          decay_rate(r(LrSchedule::decay_rate)),
          end_learning_rate(r(LrSchedule::end_learning_rate)),
          power(r(LrSchedule::power)),
          d_model(r(LrSchedule::d_model)),
          warmup_steps(r(LrSchedule::warmup_steps)),
          start_learning_rate(r(LrSchedule::start_learning_rate)),
          total_steps(r(LrSchedule::total_steps)),
          staircase(r(LrSchedule::staircase)),
          cycle(r(LrSchedule::cycle)),
          boundaries(r(LrSchedule::boundaries)),
          values(r(LrSchedule::values)) {}
  };
  static Kind decode_kind(const AttrReader& r) {
    const std::string k = r(LrSchedule::kind);
    if (auto v = find_kind(k)) return *v;
    throw Error(fmt::format("{}: {} '{}' must be one of {}", r.op().type(), LrSchedule::kind.name, k, fmt::join(kind_names, ", ")), r.op().origin());
  }

  static OpDef def() {
    return OpDef(type, "learning rate at step Step")
        .in(step).out(learning_rate)
        .attr(kind, std::string("constant"))
        .check<std::string>([](const std::string& k) { return find_kind(k).has_value(); },
                            "must be one of constant, exponential, natural_exp, inverse_time, polynomial, piecewise, cosine, noam, linear_warmup")
        .attr(learning_rate_attr, 0.01f).attr(decay_steps, 1.0f).attr(decay_rate, 0.5f).attr(staircase, false)
        .attr(end_learning_rate, 0.0001f).attr(power, 1.0f).attr(cycle, false)
        .attr(boundaries, std::vector<float>{}).attr(values, std::vector<float>{})
        .attr(d_model, 512.0f).attr(warmup_steps, 0.0f).attr(start_learning_rate, 0.0f)
        .attr(total_steps, 1.0f);
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(c.shape(step).numel() == 1, "Step must have one element, got {}", c.shape(step).str());
    // The schedule's attributes are checked here, when the op is added, rather than at the first run.
    std::string k = c.attr(kind);
    if (k == "piecewise") {
      auto b = c.attr(boundaries);
      auto v = c.attr(values);
      c.check(!v.empty() && v.size() == b.size() + 1, "piecewise needs one more value than boundaries, got {} values and {} boundaries", v.size(),
              b.size());
      c.check(std::is_sorted(b.begin(), b.end()), "piecewise boundaries must be ascending, got [{}]", fmt::join(b, ", "));
    }
    if (k == "exponential" || k == "natural_exp" || k == "inverse_time" || k == "polynomial")
      c.check(c.attr(decay_steps) > 0, "{} needs decay_steps > 0, got {}", k, c.attr(decay_steps));
    if (k == "cosine")
      c.check(c.attr(warmup_steps) >= 0 && c.attr(total_steps) > c.attr(warmup_steps), "cosine needs total_steps > warmup_steps >= 0, got {} and {}",
              c.attr(total_steps), c.attr(warmup_steps));
    if (k == "noam")
      c.check(c.attr(warmup_steps) > 0 && c.attr(d_model) > 0, "noam needs warmup_steps > 0 and d_model > 0, got {} and {}", c.attr(warmup_steps),
              c.attr(d_model));
    c.set_output(learning_rate, Shape{1}, DType::f32);
  }
  /// The schedule of `a` as the formula both kernels evaluate (ops/lr_formula.hpp); points into a's vectors.
  static LrFormula formula(const Attrs& a) {
    LrFormula f;
    f.kind = a.kind;
    f.learning_rate = a.learning_rate, f.decay_steps = a.decay_steps, f.decay_rate = a.decay_rate, f.end_learning_rate = a.end_learning_rate;
    f.power = a.power, f.d_model = a.d_model, f.warmup_steps = a.warmup_steps, f.start_learning_rate = a.start_learning_rate;
    f.total_steps = a.total_steps, f.staircase = a.staircase, f.cycle = a.cycle;
    f.pieces = int(a.boundaries.size()), f.boundaries = a.boundaries.data(), f.values = a.values.data();
    return f;
  }
  /// The learning rate at step `at` (LrFormula::at).
  static double lr_at(const Attrs& a, double at) { return formula(a).at(at); }
  static void eval_cpu(KernelContext& c, const Attrs& a);   // kernels/cpu/lr_schedule.hpp
  static void eval_cuda(KernelContext& c, const Attrs& a);  // kernels/cuda/optim.hpp
};

}  // namespace oar::ops
