// oar/layers/control_flow-inl.hpp: the implementation of control_flow.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/control_flow.hpp"

#include <algorithm>

#include "oar/ops/assign.hpp"
#include "oar/ops/control_flow.hpp"
#include "oar/tape/replay.hpp"

namespace oar {

OAR_FUNC Var detail::record_cond(const Var& pred, std::shared_ptr<Var> result, std::source_location loc) {
  auto replay = [result](LayerHelper& h) {
    int sub = h.replay_body();
    Block& sb = h.main().block(sub);
    const std::string& inner = h.name_of(*result);
    const Variable& iv = sb.var_recursive(inner);
    Variable& out = h.create_tmp(iv.dtype());
    out.set_shape(iv.shape()).set_lod_level(iv.lod_level());
    Operator assign{std::string(ops::Assign::type)};
    assign.set_input(ops::Assign::x, {inner}).set_output(ops::Assign::out, {out.name()});
    assign.set_origin(h.origin());
    add_op(sb, std::move(assign));
    std::vector<std::string> outer;  // outer variables the sub-block reads
    for (auto* op : sb.ops())
      for (auto& n : op->input_names())
        if (!sb.has_var(n) && std::find(outer.begin(), outer.end(), n) == outer.end()) outer.push_back(n);
    Variable& scope = h.block().create_var(h.name() + ".scope", {.kind = VarKind::step_scopes});
    using C = ops::ConditionalBlock;
    Operator op{std::string(C::type)};
    op.set_input(C::cond, {h.input()}).set_input(C::input, outer);
    op.set_output(C::out, {out.name()}).set_output(C::scope, {scope.name()});
    op.set_attr(C::sub_block, BlockRef{sub}).set_attr(C::is_scalar_condition, true);
    h.append_op(std::move(op));
    return std::vector<std::string>{out.name()};
  };
  return record_layer("cond", {pred}, std::move(replay), loc)[0];
}

}  // namespace oar
