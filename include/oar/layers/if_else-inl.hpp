// oar/layers/if_else-inl.hpp: the implementation of if_else.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/if_else.hpp"

#include "oar/layers/control_flow.hpp"
#include "oar/ops/split_merge_lod_tensor.hpp"
#include "oar/tape/replay.hpp"

namespace oar {

OAR_FUNC std::vector<Var> detail::record_if_else_split(const Var& mask, const std::vector<Var>& inputs, std::source_location loc) {
  if (inputs.empty()) throw Error("if_else: needs at least one input to split by the mask", Origin(loc, "if_else"));
  std::vector<Var> parts;
  for (const Var& x : inputs) {
    auto replay = [](LayerHelper& h) {
      using S = ops::SplitLoDTensor;
      const Variable& xv = h.input_var(0);
      Variable& t = h.create_tmp(xv.dtype());
      Variable& f = h.create_tmp(xv.dtype());
      Operator op{std::string(S::type)};
      op.set_input(S::x, {h.input(0)}).set_input(S::mask, {h.input(1)});
      op.set_output(S::out_true, {t.name()}).set_output(S::out_false, {f.name()});
      h.append_op(std::move(op));
      return std::vector<std::string>{t.name(), f.name()};
    };
    for (Var& v : record_layer("if_else_split", {x, mask}, std::move(replay), loc, 2)) parts.push_back(std::move(v));
  }
  return parts;
}

OAR_FUNC Var detail::record_if_else_branch(bool side, const std::vector<Var>& parts, std::shared_ptr<const std::vector<Var>> results,
                                            std::source_location loc) {
  auto replay = [results, n_parts = parts.size()](LayerHelper& h) {
    const int sub = h.replay_body();
    std::vector<std::string> inner;
    for (const Var& r : *results) inner.push_back(h.name_of(r));
    // The branch runs when its parts of the inputs hold rows (Fluid's non-scalar condition); the merge reads
    // what it returns.
    std::vector<std::string> cond;
    for (size_t k = 0; k < n_parts; ++k) cond.push_back(h.input(k));
    return append_conditional_block(h, sub, inner, cond, false);
  };
  return record_layer(side ? "if_else_true" : "if_else_false", parts, std::move(replay), loc)[0];
}

OAR_FUNC std::vector<Var> detail::record_if_else_merge(const Var& mask, const Var& rows, const Var& on_true, const Var& on_false, size_t true_count,
                                                       size_t false_count, std::source_location loc) {
  if (true_count != false_count || true_count == 0)
    throw Error(fmt::format("if_else: the true branch returns {} output(s) and the false branch {}; both must return the same number, at least one",
                            true_count, false_count),
                Origin(loc, "if_else"));
  auto replay = [true_index = on_true.index(), false_index = on_false.index()](LayerHelper& h) {
    using M = ops::MergeLoDTensor;
    const auto& names = h.context().topo.creation_outputs;
    const std::vector<std::string>& tn = names.at(true_index);
    const std::vector<std::string>& fn = names.at(false_index);
    std::vector<std::string> outs;
    for (size_t k = 0; k < tn.size(); ++k) {
      const Variable& tv = h.block().var_recursive(tn[k]);
      const Variable& fv = h.block().var_recursive(fn[k]);
      bool same = tv.dtype() == fv.dtype() && tv.shape().rank() == fv.shape().rank();
      for (int d = 1; same && d < tv.shape().rank(); ++d) same = tv.shape()[d] < 0 || fv.shape()[d] < 0 || tv.shape()[d] == fv.shape()[d];
      if (!same)
        throw Error(fmt::format("if_else: output {} of the true branch is {} {} but the false branch's is {} {}: they must match past the rows", k,
                                oar::name(tv.dtype()), tv.shape().str(), oar::name(fv.dtype()), fv.shape().str()),
                    h.origin());
      Variable& out = h.create_tmp(tv.dtype());
      Operator op{std::string(M::type)};
      op.set_input(M::in_true, {tn[k]}).set_input(M::in_false, {fn[k]}).set_input(M::x, {h.input(1)}).set_input(M::mask, {h.input(0)});
      op.set_output(M::out, {out.name()});
      h.append_op(std::move(op));
      outs.push_back(out.name());
    }
    return outs;
  };
  return record_layer("if_else", {mask, rows, on_true, on_false}, std::move(replay), loc, int(true_count));
}

}  // namespace oar
