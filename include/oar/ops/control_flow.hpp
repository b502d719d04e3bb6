// oar/ops/control_flow.hpp: control-flow ops that run a sub-block: conditional_block (run the sub-block when
// Cond holds). The executor runs them itself (no kernel).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// Runs block `sub_block` in a child scope when Cond (bool, numel 1 with is_scalar_condition) is true, or
/// when every Cond tensor is non-empty otherwise. Input lists the outer variables the sub-block reads.
struct ConditionalBlock {
  static constexpr std::string_view type = "conditional_block";
  static constexpr Slot cond{"Cond"}, input{"Input"}, out{"Out"}, scope{"Scope"};
  static constexpr Attr<BlockRef> sub_block = common::sub_block;
  static constexpr Attr<bool> is_scalar_condition{"is_scalar_condition"};

  static OpDef def() {
    return OpDef(type, "run sub_block when Cond holds")
        .in(cond, duplicable).in(input, duplicable | dispensable)
        .out(out, duplicable | dispensable).out(scope, dispensable)
        .required_attr(sub_block)
        .attr(is_scalar_condition, false)
        .no_kernel();
  }
  static void infer_shape(InferShapeContext& c) {
    if (c.attr(is_scalar_condition))
      c.check(c.shape(cond).numel() == 1 || !c.shape(cond).known(), "a scalar condition must have one element, got {}", c.shape(cond).str());
  }
};

}  // namespace oar::ops
