// oar/layers/control_flow.hpp: layers whose body is a lambda recorded as a sub-tape and replayed into a
// sub-block: `oar::cond(pred, [&] { return ...; })`.
#pragma once
#include "oar/layers/op_layer.hpp"
#include "oar/ops/assign.hpp"
#include "oar/ops/control_flow.hpp"

namespace oar {

/// Runs `body` only when `pred` (bool [1]) is true; the body's result is copied to the returned Var.
/// The body is recorded as a sub-tape and becomes a sub-block (conditional_block).
///   auto y = oar::cond(flag, [&] { return oar::fc(x, 10); });
template <class F>
Var cond(const Var& pred, F&& body, std::source_location loc = std::source_location::current()) {
  auto result = std::make_shared<Var>();
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
  Var owner = record_layer("cond", {pred}, std::move(replay), loc)[0];
  Tape& t = Tape::current();
  *result = t.record_body(owner, std::forward<F>(body));
  return owner;
}

}  // namespace oar
