// oar/ops/gru_unit.hpp: gru_unit, one GRU step on a batch of rows whose input projection is already done
// (Fluid's gru_unit). Kernels in kernels/cpu/gru_unit.hpp (the step of kernels/cpu/gru.hpp).
#pragma once
#include "oar/ops/rnn_common.hpp"

namespace oar::ops {

/// The math and layouts of gru (ops/gru.hpp) for one step: Input's 3D columns are [u | r | c]; Weight is
/// [D, 3D] stored as W_ur [D, 2D] then W_c [D, D].
///   [u, r] = gate_act(x_ur + HiddenPrev W_ur + b_ur),  c = act(x_c + (r * HiddenPrev) W_c + b_c)
///   Hidden = (1 - u) * HiddenPrev + u * c
/// Input [N, 3D], HiddenPrev [N, D], Weight [D, 3D], Bias [1, 3D] -> Gate [N, 3D] (activated [u, r, c]),
/// ResetHiddenPrev [N, D] (r * HiddenPrev), Hidden [N, D]. The activations are Fluid's integers:
/// 0 identity, 1 sigmoid, 2 tanh, 3 relu.
struct GruUnit {
  static constexpr std::string_view type = "gru_unit";
  static constexpr Slot input{"Input"}, hidden_prev{"HiddenPrev"}, weight{"Weight"}, bias{"Bias"};
  static constexpr Slot gate{"Gate"}, reset_hidden_prev{"ResetHiddenPrev"}, hidden{"Hidden"};
  static constexpr Slot input_grad{"Input@GRAD"}, hidden_prev_grad{"HiddenPrev@GRAD"}, weight_grad{"Weight@GRAD"}, bias_grad{"Bias@GRAD"};
  static constexpr Slot hidden_grad{"Hidden@GRAD"};
  static constexpr Attr<int32_t> activation{"activation"}, gate_activation{"gate_activation"};

  struct Attrs {
    RnnAct candidate, gate;
    explicit Attrs(const AttrReader& r) : candidate(detail::decode_rnn_act(r, GruUnit::activation)), gate(detail::decode_rnn_act(r, GruUnit::gate_activation)) {}
  };

  static OpDef def() {
    auto in_range = [](int32_t v) { return v >= 0 && v <= 3; };
    return OpDef(type, "one GRU step from the projected input and the previous hidden state")
        .in(input, none, "[N, 3D]").in(hidden_prev, none, "[N, D]").in(weight, none, "[D, 3D]: W_ur [D, 2D] then W_c [D, D]").in(bias, dispensable, "[1, 3D]")
        .out(gate).out(reset_hidden_prev).out(hidden)
        .attr(activation, int32_t(RnnAct::tanh), "the candidate's: 0 identity, 1 sigmoid, 2 tanh, 3 relu")
        .check<int32_t>(in_range, "must be 0 (identity), 1 (sigmoid), 2 (tanh) or 3 (relu)")
        .attr(gate_activation, int32_t(RnnAct::sigmoid), "u and r's: 0 identity, 1 sigmoid, 2 tanh, 3 relu")
        .check<int32_t>(in_range, "must be 0 (identity), 1 (sigmoid), 2 (tanh) or 3 (relu)");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(input);
    const Shape& ws = c.shape(weight);
    c.check(is_float(c.dtype(input)), "Input must be a floating-point tensor, got {}", name(c.dtype(input)));
    c.check(ws.rank() == 2 && ws[0] > 0 && dims_compatible(ws[1], 3 * ws[0]), "Weight must be [D, 3D] with a known D, got {}", ws.str());
    const int64_t d = ws[0];
    c.check(xs.rank() == 2 && dims_compatible(xs[1], 3 * d), "Input must be [N, 3D] = [N, {}] (Weight is {}), got {}", 3 * d, ws.str(), xs.str());
    detail::rnn_check_matrix(c, hidden_prev, xs[0], d, "");
    if (c.has_input(bias)) detail::rnn_check_matrix(c, bias, 1, 3 * d, "");
    const DType t = c.dtype(input);
    c.set_output(gate, Shape{xs[0], 3 * d}, t);
    c.set_output(reset_hidden_prev, Shape{xs[0], d}, t);
    c.set_output(hidden, Shape{xs[0], d}, t);
  }
  /// gru_unit_grad(HiddenPrev, Weight, Gate, ResetHiddenPrev, Hidden@GRAD) -> Input@GRAD, HiddenPrev@GRAD,
  /// Weight@GRAD, Bias@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op = g.grad_op({.inputs = {hidden_prev, weight},
                             .outputs = {gate, reset_hidden_prev},
                             .output_grads = {hidden},
                             .input_grads = {input, hidden_prev, weight}});
    detail::rnn_grad_optional(g, op, bias, bias_grad, false);
    return {op};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/gru_unit.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/gru_unit.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/rnn.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/rnn.hpp
};

}  // namespace oar::ops
