// oar/optim/clip-inl.hpp: the implementation of clip.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/optim/clip.hpp"

#include "oar/ops/clip_by_norm.hpp"
#include "oar/ops/elementwise.hpp"
#include "oar/ops/elementwise_binary.hpp"
#include "oar/ops/fused_elementwise.hpp"
#include "oar/ops/registry.hpp"
#include "oar/ops/squared_l2_norm.hpp"
#include "oar/ops/sum.hpp"

namespace oar::optim {

OAR_FUNC std::vector<ParamGrad> append_gradient_clip(Block& b, const std::vector<ParamGrad>& pg, const std::optional<GradientClip>& global) {
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
      using C = ops::ClipOp;  // param0: min, param1: max
      Operator op{std::string(C::type)};
      op.set_input(C::x, {g}).set_output(C::out, {ng}).set_attr(C::param0, float(c->a)).set_attr(C::param1, float(c->b));
      add_op(b, std::move(op));
    } else if (c->kind == GradientClip::Kind::norm) {
      using C = ops::ClipByNorm;
      Operator op{std::string(C::type)};
      op.set_input(C::x, {g}).set_output(C::out, {ng}).set_attr(C::max_norm, float(c->a));
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
      using N = ops::SquaredL2Norm;
      Operator op{std::string(N::type)};
      op.set_input(N::x, {out[i].grad}).set_output(N::out, {sq});
      add_op(b, std::move(op));
      squares.push_back(sq);
    }
    std::string total = "@GLOBAL_NORM_SQ@", factor = "@GLOBAL_CLIP_SCALE@";
    b.create_var(total, {.dtype = t, .shape = Shape{1}});
    b.create_var(factor, {.dtype = t, .shape = Shape{1}});
    Operator sum{std::string(ops::Sum::type)};
    sum.set_input(ops::Sum::x, squares).set_output(ops::Sum::out, {total});
    add_op(b, std::move(sum));
    using F = ops::FusedElementwise;
    Operator f{std::string(F::type)};
    f.set_input(F::x, {total}).set_output(F::out, {factor}).set_attr(F::expression, fmt::format("c:{0} c:{0} x0 sqrt max div", global_norm));
    add_op(b, std::move(f));
    for (size_t i : global_members) {
      std::string ng = out[i].grad + "@CLIP";
      b.create_var(ng, {.dtype = t, .shape = b.var_recursive(out[i].grad).shape()});
      using M = ops::ElementwiseMul;
      Operator mul{std::string(M::type)};
      mul.set_input(M::x, {out[i].grad}).set_input(M::y, {factor}).set_output(M::out, {ng});
      add_op(b, std::move(mul));
      out[i].grad = ng;
    }
  }
  return out;
}

}  // namespace oar::optim
