// oar/ops/control_flow.hpp: control-flow ops that run a sub-block: conditional_block (run the sub-block when
// Cond holds). The executor runs them itself (no kernel).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// Runs block `sub_block` in a child scope when Cond (bool, numel 1 with is_scalar_condition) is true, or
/// when every Cond tensor is non-empty otherwise. Input lists the outer variables the sub-block reads.
struct ConditionalBlock {
  static OpDef def() {
    return OpDef("conditional_block", "run sub_block when Cond holds")
        .in("Cond", duplicable).in("Input", duplicable | dispensable)
        .out("Out", duplicable | dispensable).out("Scope", dispensable)
        .required_attr<BlockRef>("sub_block")
        .attr("is_scalar_condition", false)
        .no_kernel();
  }
  static void infer_shape(InferShapeContext& c) {
    if (c.attr<bool>("is_scalar_condition"))
      c.check(c.shape("Cond").numel() == 1 || !c.shape("Cond").known(), "a scalar condition must have one element, got {}", c.shape("Cond").str());
  }
};

}  // namespace oar::ops
