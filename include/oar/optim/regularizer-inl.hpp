// oar/optim/regularizer-inl.hpp: the implementation of regularizer.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/optim/regularizer.hpp"

#include "oar/ops/registry.hpp"
#include "oar/ops/scale.hpp"
#include "oar/ops/sign.hpp"
#include "oar/ops/sum.hpp"

namespace oar::optim {

OAR_FUNC std::vector<ParamGrad> append_regularization(Block& b, const std::vector<ParamGrad>& pg, const std::optional<Regularizer>& global) {
  std::vector<ParamGrad> out;
  for (auto& [p, g] : pg) {
    const Variable& pv = b.var_recursive(p);
    std::optional<Regularizer> r = global;
    if (pv.param() && !pv.param()->regularizer.empty())
      r = Regularizer{pv.param()->regularizer == "l1" ? Regularizer::Kind::l1 : Regularizer::Kind::l2, pv.param()->regularizer_coeff};
    if (!r || r->coeff == 0) {
      out.push_back({p, g});
      continue;
    }
    std::string src = p;
    if (r->kind == Regularizer::Kind::l1) {
      src = p + "@SIGN";
      b.create_var(src, {.dtype = pv.dtype(), .shape = pv.shape()});
      Operator sign{std::string(ops::Sign::type)};
      sign.set_input(ops::Sign::x, {p}).set_output(ops::Sign::out, {src});
      add_op(b, std::move(sign));
    }
    std::string decay = p + "@DECAY";
    b.create_var(decay, {.dtype = pv.dtype(), .shape = pv.shape()});
    using S = ops::Scale;
    Operator scale{std::string(S::type)};
    scale.set_input(S::x, {src}).set_output(S::out, {decay}).set_attr(S::scale, float(r->coeff));
    add_op(b, std::move(scale));
    std::string ng = g + "@REGULARIZED";
    b.create_var(ng, {.dtype = pv.dtype(), .shape = pv.shape()});
    Operator sum{std::string(ops::Sum::type)};
    sum.set_input(ops::Sum::x, {g, decay}).set_output(ops::Sum::out, {ng});
    add_op(b, std::move(sum));
    out.push_back({p, ng});
  }
  return out;
}

}  // namespace oar::optim
