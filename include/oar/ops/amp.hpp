// oar/ops/amp.hpp: the ops of dynamic loss scaling (mixed-precision training, optim/mixed_precision.hpp), in
// Paddle's layout: check_finite_and_unscale divides the gradients by the loss scale and says whether any was
// inf or NaN; update_loss_scaling moves the scale from that. Neither has a gradient. Kernels:
// kernels/cpu/amp.hpp, kernels/cuda/amp.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// Out[i] = X[i] / Scale for every gradient X[i] (in place when Out[i] is X[i]); FoundInfinite = whether any
/// element of any X[i] is inf or NaN (checked on X, before the division).
struct CheckFiniteAndUnscale {
  static constexpr std::string_view type = "check_finite_and_unscale";
  static constexpr Slot x{"X"}, scale{"Scale"}, out{"Out"}, found_infinite{"FoundInfinite"};

  static OpDef def() {
    return OpDef(type, "Out = X / Scale for each gradient; FoundInfinite = any inf or NaN in them")
        .in(x, duplicable).in(scale)
        .out(out, duplicable).out(found_infinite);
  }
  static void infer_shape(InferShapeContext& c) {
    const size_t n = c.num_inputs(x);
    c.check(c.num_outputs(out) == n, "Out lists {} variables but X lists {}", c.num_outputs(out), n);
    const int64_t s = c.shape(scale).numel();
    c.check(s < 0 || s == 1, "Scale must hold one value, got shape {}", c.shape(scale).str());
    c.check(c.dtype(scale) == DType::f32, "Scale must be float32, got {}", name(c.dtype(scale)));
    for (size_t i = 0; i < n; ++i) {
      c.check(is_float(c.dtype(x, i)), "X[{}] ('{}') must be a floating-point tensor, got {}", i, c.op().input(x)[i], name(c.dtype(x, i)));
      c.set_output(out, c.shape(x, i), c.dtype(x, i), -1, i);
    }
    c.set_output(found_infinite, Shape{1}, DType::boolean);
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);   // kernels/cpu/amp.hpp
  static void eval_cuda(KernelContext&, const NoAttrs&);  // kernels/cuda/amp.hpp
};

/// The next loss scale. With FoundInfinite: GoodSteps = 0 and BadSteps + 1; when that reaches
/// decr_every_n_nan_or_inf, the scale times decr_ratio (not below 1) and BadSteps = 0. Without: BadSteps = 0
/// and GoodSteps + 1; when that reaches incr_every_n_steps, the scale times incr_ratio (kept when that
/// overflows to inf) and GoodSteps = 0.
struct UpdateLossScaling {
  static constexpr std::string_view type = "update_loss_scaling";
  static constexpr Slot found_infinite{"FoundInfinite"}, prev_loss_scaling{"PrevLossScaling"}, in_good_steps{"InGoodSteps"},
      in_bad_steps{"InBadSteps"};
  static constexpr Slot loss_scaling{"LossScaling"}, out_good_steps{"OutGoodSteps"}, out_bad_steps{"OutBadSteps"};
  static constexpr Attr<int32_t> incr_every_n_steps{"incr_every_n_steps"}, decr_every_n_nan_or_inf{"decr_every_n_nan_or_inf"};
  static constexpr Attr<float> incr_ratio{"incr_ratio"}, decr_ratio{"decr_ratio"};

  struct Attrs {
    int32_t incr_every_n_steps, decr_every_n_nan_or_inf;
    float incr_ratio, decr_ratio;
    explicit Attrs(const AttrReader& r)
        : incr_every_n_steps(r(UpdateLossScaling::incr_every_n_steps)),
          decr_every_n_nan_or_inf(r(UpdateLossScaling::decr_every_n_nan_or_inf)),
          incr_ratio(r(UpdateLossScaling::incr_ratio)),
          decr_ratio(r(UpdateLossScaling::decr_ratio)) {}
  };

  static OpDef def() {
    return OpDef(type, "the next dynamic loss scale from whether the gradients were finite")
        .in(found_infinite).in(prev_loss_scaling).in(in_good_steps).in(in_bad_steps)
        .out(loss_scaling).out(out_good_steps).out(out_bad_steps)
        .attr(incr_every_n_steps, 1000).check<int32_t>([](int32_t n) { return n >= 1; }, "must be >= 1")
        .attr(decr_every_n_nan_or_inf, 2).check<int32_t>([](int32_t n) { return n >= 1; }, "must be >= 1")
        .attr(incr_ratio, 2.0f).check<float>([](float r) { return r >= 1.f; }, "must be >= 1")
        .attr(decr_ratio, 0.5f).check<float>([](float r) { return r > 0.f && r <= 1.f; }, "must be in (0, 1]");
  }
  static void infer_shape(InferShapeContext& c) {
    auto one = [&](Slot s, DType t) {
      const int64_t n = c.shape(s).numel();
      c.check(n < 0 || n == 1, "{} must hold one value, got shape {}", s.name, c.shape(s).str());
      c.check(c.dtype(s) == t, "{} must be {}, got {}", s.name, name(t), name(c.dtype(s)));
    };
    one(found_infinite, DType::boolean);
    one(prev_loss_scaling, DType::f32);
    one(in_good_steps, DType::i32);
    one(in_bad_steps, DType::i32);
    c.set_output(loss_scaling, Shape{1}, DType::f32);
    c.set_output(out_good_steps, Shape{1}, DType::i32);
    c.set_output(out_bad_steps, Shape{1}, DType::i32);
  }
  static void eval_cpu(KernelContext&, const Attrs&);   // kernels/cpu/amp.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/amp.hpp
};

}  // namespace oar::ops
