// oar/ops/recurrent.hpp: recurrent (Fluid's name), the op a recurrent group records: its step block runs once
// per time step over LoD sequences, in Fluid's batch layout, and recurrent_grad runs the step's grad block over
// the saved step scopes in reverse. The executor runs both itself (no kernel); autodiff builds the grad block.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// Runs `sub_block` once per time step t = 0 .. T-1 of the sequences of `inputs` (all with the same one-level
/// LoD; T the longest length). The sequences are ordered by length, longest first (stable), and step t sees the
/// k_t sequences longer than t: the step block's variable `step_inputs[i]` holds row t of each of them
/// ([k_t, ...], in that order), `ex_states[m]` holds `states[m]` of step t-1 (its first k_t rows) or, at step 0,
/// the boot: row s of `initial_states[boot_states[m]]` for sequence s, or zeros where `boot_states[m]` is -1.
/// `step_outputs[j]`'s rows are scattered back into `outputs[j]`, which has the inputs' LoD. Each step runs in
/// its own scope, kept in `step_scopes` for recurrent_grad. `parameters` lists the outer variables the step
/// block reads (parameters and other outer variables), so that dependency analysis and autodiff see them.
struct Recurrent {
  static constexpr std::string_view type = "recurrent";
  static constexpr Slot inputs{"inputs"}, initial_states{"initial_states"}, parameters{"parameters"};
  static constexpr Slot outputs{"outputs"}, step_scopes{"step_scopes"};
  static constexpr Attr<BlockRef> sub_block = common::sub_block;
  static constexpr Attr<std::vector<std::string>> step_inputs{"step_inputs"}, step_outputs{"step_outputs"};
  static constexpr Attr<std::vector<std::string>> ex_states{"ex_states"}, states{"states"};
  static constexpr Attr<std::vector<int32_t>> boot_states{"boot_states"};

  static OpDef def() {
    return OpDef(type, "run sub_block once per time step of LoD sequences (a recurrent group)")
        .in(inputs, duplicable).in(initial_states, duplicable | dispensable).in(parameters, duplicable | dispensable)
        .out(outputs, duplicable).out(step_scopes)
        .required_attr(sub_block)
        .required_attr(step_inputs).required_attr(step_outputs)
        .attr(ex_states, {}).attr(states, {}).attr(boot_states, {})
        .no_kernel(RunBy::recurrent);
  }
  static void infer_shape(InferShapeContext& c) {
    const auto& op = c.op();
    c.check(op.attr(step_inputs).size() == c.num_inputs(inputs), "{} step_inputs for {} inputs", op.attr(step_inputs).size(), c.num_inputs(inputs));
    c.check(op.attr(step_outputs).size() == c.num_outputs(outputs), "{} step_outputs for {} outputs", op.attr(step_outputs).size(), c.num_outputs(outputs));
    const size_t m = op.attr(ex_states).size();
    c.check(op.attr(states).size() == m && op.attr(boot_states).size() == m, "ex_states, states and boot_states must have one entry per memory, got {}, {}, {}",
            m, op.attr(states).size(), op.attr(boot_states).size());
    for (int32_t b : op.attr(boot_states))
      c.check(b >= -1 && b < int32_t(c.num_inputs(initial_states)), "boot_states entry {} is not -1 or an index of initial_states", b);
    for (size_t i = 0; i < c.num_inputs(inputs); ++i) c.check(c.lod_level(inputs, i) >= 1, "input {} has no LoD (lod_level 0)", op.input(inputs)[i]);
  }
};

/// The gradient of recurrent: `sub_block` is the grad block of the step block (autodiff builds it); it runs in a
/// child scope of each saved step scope, from the last step to the first. Before step t, the gradient of step
/// output j (rows of `outputs@GRAD`) is written to `output_seeds[j]`, and the gradient of memory m coming from
/// step t+1 (`ex_states[m]@GRAD` there) is added into `state_seeds[m]`; after it, `step_inputs[i]@GRAD` goes to
/// `inputs@GRAD`, and the grad block's `parameters[p]@GRAD` is summed over the steps into `parameters@GRAD`;
/// `ex_states[m]@GRAD` of step 0 is the boot's gradient.
struct RecurrentGrad {
  static constexpr std::string_view type = "recurrent_grad";
  static constexpr Slot inputs = Recurrent::inputs, initial_states = Recurrent::initial_states, parameters = Recurrent::parameters;
  static constexpr Slot outputs = Recurrent::outputs, step_scopes = Recurrent::step_scopes;
  static constexpr Slot outputs_grad{"outputs@GRAD"};
  static constexpr Slot inputs_grad{"inputs@GRAD"}, initial_states_grad{"initial_states@GRAD"}, parameters_grad{"parameters@GRAD"};
  static constexpr Attr<BlockRef> sub_block = common::sub_block;
  static constexpr auto step_inputs = Recurrent::step_inputs, step_outputs = Recurrent::step_outputs;
  static constexpr auto ex_states = Recurrent::ex_states, states = Recurrent::states;
  static constexpr auto boot_states = Recurrent::boot_states;
  static constexpr Attr<std::vector<std::string>> output_seeds{"output_seeds"}, state_seeds{"state_seeds"};

  static OpDef def() {
    return OpDef(type, "gradient of recurrent: its grad block over the saved step scopes, last step first")
        .in(inputs, duplicable).in(initial_states, duplicable | dispensable).in(parameters, duplicable | dispensable)
        .in(outputs, duplicable).in(outputs_grad, duplicable).in(step_scopes)
        .out(inputs_grad, duplicable | dispensable).out(initial_states_grad, duplicable | dispensable).out(parameters_grad, duplicable | dispensable)
        .required_attr(sub_block)
        .required_attr(step_inputs).required_attr(step_outputs)
        .attr(ex_states, {}).attr(states, {}).attr(boot_states, {})
        .required_attr(output_seeds).attr(state_seeds, {})
        .no_kernel(RunBy::recurrent_grad);
  }
  static void infer_shape(InferShapeContext& c) {
    const auto& op = c.op();
    c.check(op.attr(output_seeds).size() == c.num_inputs(outputs), "{} output_seeds for {} outputs", op.attr(output_seeds).size(), c.num_inputs(outputs));
    c.check(op.attr(state_seeds).size() == op.attr(states).size(), "{} state_seeds for {} states", op.attr(state_seeds).size(), op.attr(states).size());
  }
};

}  // namespace oar::ops
