// oar/ops/control_flow.hpp: control-flow ops that run a sub-block: conditional_block (run the sub-block when
// Cond holds), while (run it as long as a condition the body computes holds) and their gradients, which run
// the grad blocks in the scopes the forward ran in. The executor runs them itself (no kernel).
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
        .no_kernel(RunBy::conditional);
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
        .no_kernel(RunBy::conditional_grad);
  }
  static void infer_shape(InferShapeContext&) {}
};

/// Fluid's While loop, with loop variables: while the condition holds, the sub-block runs once more in a new step
/// scope (all kept, in StepScopes, for while_grad). At the start of step t the sub-block's variable
/// `ex_states[m]` holds loop variable m: `InitStates[m]` at t = 0, else `states[m]` of step t-1 (shared, not
/// copied: the body only reads it). The first condition is `Condition` (bool, one element), the next one the
/// sub-block's `next_condition` after each step. When the loop ends, `FinalStates[m]` is a copy of the last
/// `states[m]` (of `InitStates[m]` when no step ran). X lists the outer variables the body reads and Out the
/// outer ones it writes in place (tensor arrays written at the step's index), so that dependency analysis and
/// autodiff see them. More than `max_iterations` steps is an oar::Error (a condition that never turns false).
struct While {
  static constexpr std::string_view type = "while";
  static constexpr Slot x{"X"}, condition{"Condition"}, init_states{"InitStates"};
  static constexpr Slot out{"Out"}, final_states{"FinalStates"}, step_scopes{"StepScopes"};
  static constexpr Attr<BlockRef> sub_block = common::sub_block;
  static constexpr Attr<std::vector<std::string>> ex_states{"ex_states"}, states{"states"};
  static constexpr Attr<std::string> next_condition{"next_condition"};
  static constexpr Attr<int64_t> max_iterations{"max_iterations"};

  static OpDef def() {
    return OpDef(type, "run sub_block while the condition holds, carrying loop variables from step to step")
        .in(x, duplicable | dispensable).in(condition).in(init_states, duplicable | dispensable)
        .out(out, duplicable | dispensable).out(final_states, duplicable | dispensable).out(step_scopes)
        .required_attr(sub_block)
        .attr(ex_states, {}).attr(states, {})
        .required_attr(next_condition)
        .attr(max_iterations, int64_t(1) << 20)
        .no_kernel(RunBy::while_loop);
  }
  static void infer_shape(InferShapeContext& c) {
    const auto& op = c.op();
    const size_t m = op.attr(ex_states).size();
    c.check(op.attr(states).size() == m && c.num_inputs(init_states) == m && c.num_outputs(final_states) == m,
            "ex_states, states, InitStates and FinalStates must have one entry per loop variable, got {}, {}, {}, {}", m, op.attr(states).size(),
            c.num_inputs(init_states), c.num_outputs(final_states));
    c.check(c.dtype(condition) == DType::boolean && (c.shape(condition).numel() == 1 || !c.shape(condition).known()),
            "Condition must be one bool, got {} {}", name(c.dtype(condition)), c.shape(condition).str());
    c.check(op.attr(max_iterations) > 0, "max_iterations must be positive, got {}", op.attr(max_iterations));
  }
};

/// The gradient of while: `sub_block` is the grad block of the body (autodiff builds it). It runs in a child of
/// each saved step scope, last step first. Before step t, `state_seeds[m]` there holds the gradient of
/// `states[m]`: `FinalStates@GRAD[m]` for the last step, else `ex_states[m]@GRAD` of step t+1; and
/// `out_seeds[j]` holds `Out@GRAD[j]` (the gradient of an array the body writes, whole: each step's grad ops read
/// their own entry). After it, the grad block's `X[i]@GRAD` is summed over the steps into `X@GRAD[i]` (per entry
/// for tensor arrays, rows appended when sparse). After step 0,
/// `ex_states[m]@GRAD` is `InitStates@GRAD[m]`. A gradient never reached is zeros.
struct WhileGrad {
  static constexpr std::string_view type = "while_grad";
  static constexpr Slot x = While::x, init_states = While::init_states, out = While::out, final_states = While::final_states;
  static constexpr Slot step_scopes = While::step_scopes;
  static constexpr Slot final_states_grad{"FinalStates@GRAD"}, out_grad{"Out@GRAD"}, x_grad{"X@GRAD"}, init_states_grad{"InitStates@GRAD"};
  static constexpr Attr<BlockRef> sub_block = common::sub_block;
  static constexpr auto ex_states = While::ex_states, states = While::states;
  static constexpr Attr<std::vector<std::string>> state_seeds{"state_seeds"}, out_seeds{"out_seeds"};

  static OpDef def() {
    return OpDef(type, "gradient of while: its grad block over the saved step scopes, last step first")
        .in(x, duplicable | dispensable).in(init_states, duplicable | dispensable)
        .in(out, duplicable | dispensable).in(out_grad, duplicable | dispensable).in(final_states, duplicable | dispensable)
        .in(final_states_grad, duplicable | dispensable).in(step_scopes)
        .out(x_grad, duplicable | dispensable).out(init_states_grad, duplicable | dispensable)
        .required_attr(sub_block)
        .attr(ex_states, {}).attr(states, {}).attr(state_seeds, {}).attr(out_seeds, {})
        .no_kernel(RunBy::while_grad);
  }
  static void infer_shape(InferShapeContext& c) {
    const auto& op = c.op();
    c.check(op.attr(state_seeds).size() == op.attr(states).size(), "{} state_seeds for {} states", op.attr(state_seeds).size(), op.attr(states).size());
    c.check(op.attr(out_seeds).size() == c.num_inputs(out_grad), "{} out_seeds for {} Out@GRAD", op.attr(out_seeds).size(), c.num_inputs(out_grad));
  }
};

}  // namespace oar::ops
