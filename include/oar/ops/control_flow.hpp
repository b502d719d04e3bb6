// oar/ops/control_flow.hpp: control-flow ops that run a sub-block: conditional_block (run the sub-block when
// Cond holds) and conditional_block_grad (run its grad block in the scope the forward ran in). The executor runs
// them itself (no kernel).
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

/// The gradient of conditional_block (Fluid's conditional_block_grad). `sub_block` is the grad block that
/// autodiff built from the forward's sub-block (its parent). When Cond held, the executor runs it in a child of
/// the scope the forward ran in (listed in Scope), where it reads the forward's activations and `Out@GRAD`
/// (from the outer scope); then `Input[i]@GRAD` of the grad block goes to `Input@GRAD[i]`. When Cond did not
/// hold, or an input's gradient is not reached inside the block, that gradient is zeros shaped like the input:
/// zeros rather than Fluid's absent gradient, so that sums and optimizers after it need no special case.
struct ConditionalBlockGrad {
  static constexpr std::string_view type = "conditional_block_grad";
  static constexpr Slot cond = ConditionalBlock::cond, input = ConditionalBlock::input, out = ConditionalBlock::out, scope = ConditionalBlock::scope;
  static constexpr Slot out_grad{"Out@GRAD"}, input_grad{"Input@GRAD"};
  static constexpr Attr<BlockRef> sub_block = common::sub_block;
  static constexpr Attr<bool> is_scalar_condition = ConditionalBlock::is_scalar_condition;

  static OpDef def() {
    return OpDef(type, "gradient of conditional_block: its grad block in the forward's scope, when Cond held")
        .in(cond, duplicable).in(input, duplicable | dispensable).in(out, duplicable | dispensable).in(out_grad, duplicable | dispensable).in(scope)
        .out(input_grad, duplicable | dispensable)
        .required_attr(sub_block)
        .attr(is_scalar_condition, false)
        .no_kernel();
  }
  static void infer_shape(InferShapeContext&) {}
};

}  // namespace oar::ops
