// oar/optim/mixed_precision-inl.hpp: the implementation of mixed_precision.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/optim/mixed_precision.hpp"

#include <algorithm>

#include "oar/ops/amp.hpp"
#include "oar/ops/assign.hpp"
#include "oar/ops/fill_constant.hpp"
#include "oar/ops/registry.hpp"
#include "oar/ops/scale.hpp"
#include "oar/optim/optimizer-inl.hpp"  // detail::make_global

namespace oar::optim {

OAR_FUNC const std::vector<std::string>& half_op_types() {
  static const std::vector<std::string> types = {"mul", "matmul", "conv2d", "conv2d_transpose"};
  return types;
}

namespace detail {
inline Operator cast_op(const std::string& from, const std::string& to, DType a, DType b, const Origin& origin) {
  using C = ops::Cast;
  Operator op{std::string(C::type)};
  op.set_input(C::x, {from}).set_output(C::out, {to}).set_attr(C::in_dtype, int32_t(a)).set_attr(C::out_dtype, int32_t(b));
  op.set_origin(origin);
  return op;
}
}  // namespace detail

OAR_FUNC int cast_to_half(Program& program, DType t) {
  OAR_CHECK(t == DType::f16 || t == DType::bf16, "mixed precision runs in f16 or bf16, not {}", name(t));
  Block& b = program.global_block();
  const auto& types = half_op_types();
  const std::string suffix = t == DType::f16 ? ".f16" : ".bf16";
  int converted = 0;
  for (size_t i = 0; i < b.num_ops(); ++i) {
    Operator& op = b.op(i);
    if (std::find(types.begin(), types.end(), op.type()) == types.end()) continue;
    bool all_f32 = true;
    for (auto& n : op.input_names()) all_f32 = all_f32 && b.var_recursive(n).dtype() == DType::f32;
    for (auto& n : op.output_names()) all_f32 = all_f32 && b.var_recursive(n).dtype() == DType::f32;
    if (!all_f32) continue;  // an f64 program, or one already converted
    const Origin origin = op.origin();
    std::vector<Operator> before;
    for (auto& slot : op.mutable_inputs())
      for (auto& n : slot.args) {
        const Variable& v = b.var_recursive(n);
        std::string h = n + suffix + "." + std::to_string(i);  // one cast per reading op: a variable may be rewritten between two readers
        b.create_var(h, {.dtype = t, .shape = v.shape(), .lod_level = v.lod_level()});
        before.push_back(detail::cast_op(n, h, DType::f32, t, origin));
        n = h;
      }
    std::vector<Operator> after;
    for (auto& slot : op.mutable_outputs())
      for (auto& n : slot.args) {
        const Variable& v = b.var_recursive(n);
        std::string h = n + suffix;
        b.create_var(h, {.dtype = t, .shape = v.shape(), .lod_level = v.lod_level()});
        after.push_back(detail::cast_op(h, n, t, DType::f32, origin));
        n = h;
      }
    for (auto& c : after) b.insert_op(i + 1, std::move(c));
    for (auto& c : before) b.insert_op(i, std::move(c));
    i += before.size() + after.size();
    ++converted;
  }
  return converted;
}

OAR_FUNC void scale_loss_gradient(Program& program, const std::string& loss) {
  Block& b = program.global_block();
  const std::string g = grad_var_name(loss);
  const Variable& lv = b.var_recursive(loss);
  OAR_CHECK(lv.dtype() == DType::f32, "mixed precision: the loss '{}' must be float32, got {}", loss, name(lv.dtype()));
  for (size_t i = 0; i < b.num_ops(); ++i) {
    const Operator& op = b.op(i);
    if (op.type() != ops::FillConstant::type || op.output(ops::FillConstant::out) != std::vector<std::string>{g}) continue;
    if (!b.find_var(kLossScaling)) {
      Variable& s = b.create_var(kLossScaling, {.dtype = DType::f32, .shape = Shape{1}, .persistable = true});
      s.set_stop_gradient(true);
    }
    using A = ops::Assign;
    Operator seed{std::string(A::type)};
    seed.set_input(A::x, {kLossScaling}).set_output(A::out, {g});
    seed.set_origin(op.origin());
    b.remove_op(i);
    b.insert_op(i, std::move(seed));
    return;
  }
  throw Error(fmt::format("mixed precision: the backward pass of '{}' has no seed of '{}'", loss, g));
}

OAR_FUNC void append_unscale(Program& program, const std::vector<ParamGrad>& params_grads) {
  Block& b = program.global_block();
  using U = ops::CheckFiniteAndUnscale;
  std::vector<std::string> grads;
  for (auto& pg : params_grads) grads.push_back(pg.grad);
  if (!b.find_var(kFoundInfinite)) b.create_var(kFoundInfinite, {.dtype = DType::boolean, .shape = Shape{1}, .stop_gradient = true});
  Operator op{std::string(U::type)};
  op.set_input(U::x, grads).set_input(U::scale, {kLossScaling}).set_output(U::out, grads).set_output(U::found_infinite, {kFoundInfinite});
  add_op(b, std::move(op));
}

OAR_FUNC void declare_loss_scaling(Program& main, Program& startup, const MixedPrecision& m) {
  OAR_CHECK(m.dtype == DType::f16 || m.dtype == DType::bf16, "with_mixed_precision: dtype must be f16 or bf16, got {}", name(m.dtype));
  OAR_CHECK(m.init_loss_scaling >= 1.f, "with_mixed_precision: init_loss_scaling must be >= 1, got {}", m.init_loss_scaling);
  OAR_CHECK(m.incr_every_n_steps >= 1 && m.decr_every_n_nan_or_inf >= 1, "with_mixed_precision: incr_every_n_steps and decr_every_n_nan_or_inf must be >= 1");
  OAR_CHECK(m.incr_ratio >= 1.f && m.decr_ratio > 0.f && m.decr_ratio <= 1.f, "with_mixed_precision: incr_ratio must be >= 1 and decr_ratio in (0, 1]");
  detail::make_global(main, startup, kLossScaling, DType::f32, Shape{1}, m.init_loss_scaling);
  detail::make_global(main, startup, kGoodSteps, DType::i32, Shape{1}, 0);
  detail::make_global(main, startup, kBadSteps, DType::i32, Shape{1}, 0);
}

OAR_FUNC std::string append_scaled_update(Program& main, Program& startup, const Rule& rule, const std::vector<ParamGrad>& params_grads) {
  OAR_CHECK(rule.mixed_precision.has_value(), "append_scaled_update: the rule has no mixed_precision");
  const MixedPrecision& m = *rule.mixed_precision;
  declare_loss_scaling(main, startup, m);
  Block& g = main.global_block();
  if (!g.find_var(kFoundInfinite)) g.create_var(kFoundInfinite, {.dtype = DType::boolean, .shape = Shape{1}, .stop_gradient = true});
  if (m.dynamic_loss_scaling) {
    using U = ops::UpdateLossScaling;
    Operator op{std::string(U::type)};
    op.set_input(U::found_infinite, {kFoundInfinite}).set_input(U::prev_loss_scaling, {kLossScaling});
    op.set_input(U::in_good_steps, {kGoodSteps}).set_input(U::in_bad_steps, {kBadSteps});
    op.set_output(U::loss_scaling, {kLossScaling}).set_output(U::out_good_steps, {kGoodSteps}).set_output(U::out_bad_steps, {kBadSteps});
    op.set_attr(U::incr_every_n_steps, m.incr_every_n_steps).set_attr(U::decr_every_n_nan_or_inf, m.decr_every_n_nan_or_inf);
    op.set_attr(U::incr_ratio, m.incr_ratio).set_attr(U::decr_ratio, m.decr_ratio);
    add_op(g, std::move(op));
  }
  return append_update(main, startup, rule, params_grads, 0, kFoundInfinite);
}

}  // namespace oar::optim
