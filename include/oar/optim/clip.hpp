// oar/optim/clip.hpp: gradient clipping as ops (Fluid's append_gradient_clip_ops): by value (clip), by norm
// (clip_by_norm: g * c / max(|g|, c)), by global norm over every gradient that asks for it
// (g * c / max(c, sqrt(sum_i |g_i|^2))).
#pragma once
#include "oar/autodiff/backward.hpp"
#include "oar/layers/param_attr.hpp"

namespace oar::optim {

inline std::vector<ParamGrad> append_gradient_clip(Block& b, const std::vector<ParamGrad>& pg, const std::optional<GradientClip>& global) {
  std::vector<ParamGrad> out;
  std::vector<size_t> global_members;
  double global_norm = 0;
  for (auto& [p, g] : pg) {
    const Variable& pv = b.var_recursive(p);
    std::optional<GradientClip> c = global;
    if (pv.param() && !pv.param()->gradient_clip.empty()) {
      const auto& k = pv.param()->gradient_clip;
      c = GradientClip{k == "value" ? GradientClip::Kind::value : k == "norm" ? GradientClip::Kind::norm : GradientClip::Kind::global_norm,
                       pv.param()->clip_a, pv.param()->clip_b};
    }
    if (!c) {
      out.push_back({p, g});
      continue;
    }
    std::string ng = g + "@CLIP";
    b.create_var(ng, {.dtype = pv.dtype(), .shape = pv.shape()});
    if (c->kind == GradientClip::Kind::value) {
      Operator op("clip");
      op.set_input("X", {g}).set_output("Out", {ng}).set_attr("min", float(c->a)).set_attr("max", float(c->b));
      add_op(b, std::move(op));
    } else if (c->kind == GradientClip::Kind::norm) {
      Operator op("clip_by_norm");
      op.set_input("X", {g}).set_output("Out", {ng}).set_attr("max_norm", float(c->a));
      add_op(b, std::move(op));
    } else {
      global_members.push_back(out.size());
      global_norm = c->a;
      b.remove_var(ng);
      out.push_back({p, g});
      continue;
    }
    out.push_back({p, ng});
  }
  if (!global_members.empty()) {
    // scale = c / max(c, sqrt(sum of squared norms)), then every member gradient times scale.
    std::vector<std::string> squares;
    DType t = b.var_recursive(out[global_members[0]].param).dtype();
    for (size_t i : global_members) {
      std::string sq = out[i].grad + "@SQNORM";
      b.create_var(sq, {.dtype = t, .shape = Shape{1}});
      Operator op("squared_l2_norm");
      op.set_input("X", {out[i].grad}).set_output("Out", {sq});
      add_op(b, std::move(op));
      squares.push_back(sq);
    }
    std::string total = "@GLOBAL_NORM_SQ@", factor = "@GLOBAL_CLIP_SCALE@";
    b.create_var(total, {.dtype = t, .shape = Shape{1}});
    b.create_var(factor, {.dtype = t, .shape = Shape{1}});
    Operator sum("sum");
    sum.set_input("X", squares).set_output("Out", {total});
    add_op(b, std::move(sum));
    Operator f("fused_elementwise");
    f.set_input("X", {total}).set_output("Out", {factor}).set_attr("expression", fmt::format("c:{0} c:{0} x0 sqrt max div", global_norm));
    add_op(b, std::move(f));
    for (size_t i : global_members) {
      std::string ng = out[i].grad + "@CLIP";
      b.create_var(ng, {.dtype = t, .shape = b.var_recursive(out[i].grad).shape()});
      Operator mul("elementwise_mul");
      mul.set_input("X", {out[i].grad}).set_input("Y", {factor}).set_output("Out", {ng});
      add_op(b, std::move(mul));
      out[i].grad = ng;
    }
  }
  return out;
}

}  // namespace oar::optim
