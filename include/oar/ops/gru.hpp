// oar/ops/gru.hpp: gru, Fluid's dynamic GRU over the sequences of a LoD tensor whose input projection is
// already done (an fc to 3D). Kernels in kernels/cpu/gru.hpp: every time step of all sequences at once (Fluid's
// batch layout, kernels/cpu/rnn_batch.hpp).
#pragma once
#include "oar/ops/rnn_common.hpp"

namespace oar::ops {

/// Gate order: the 3D columns of Input and Bias are [update u | reset r | candidate c]. Weight is [D, 3D] as
/// Fluid stores it: its first 2D*D values are the gates' [D, 2D] matrix W_ur (row-major), the last D*D the
/// candidate's [D, D] matrix W_c. Per sequence (read backwards with is_reverse), from h_{-1} = H0 (or 0):
///   [u, r] = gate_act(x_ur + h_{t-1} W_ur + b_ur)
///   c = act(x_c + (r * h_{t-1}) W_c + b_c)
///   h_t = (1 - u) * h_{t-1} + u * c
/// Input [T, 3D] (LoD: the last level gives the sequences), Weight [D, 3D], Bias [1, 3D], H0 [S, D] (S
/// sequences, in LoD order) -> Hidden [T, D] (Input's LoD); BatchGate [T, 3D] (activated [u, r, c]),
/// BatchResetHiddenPrev [T, D] (r * h_{t-1}), BatchHidden [T, D] (h_t), in the batch layout, for the grad.
struct Gru {
  static constexpr std::string_view type = "gru";
  static constexpr Slot input{"Input"}, weight{"Weight"}, bias{"Bias"}, h0{"H0"};
  static constexpr Slot hidden{"Hidden"}, batch_gate{"BatchGate"}, batch_reset_hidden_prev{"BatchResetHiddenPrev"}, batch_hidden{"BatchHidden"};
  static constexpr Slot input_grad{"Input@GRAD"}, weight_grad{"Weight@GRAD"}, bias_grad{"Bias@GRAD"}, h0_grad{"H0@GRAD"};
  static constexpr Slot hidden_grad{"Hidden@GRAD"};
  static constexpr Attr<bool> is_reverse{"is_reverse"};
  static constexpr Attr<std::string> activation{"activation"}, gate_activation{"gate_activation"};

  /// What the kernels read, decoded once when a program is prepared.
  struct Attrs {
    bool is_reverse;
    RnnAct gate, candidate;
    explicit Attrs(const AttrReader& r)
        : is_reverse(r(Gru::is_reverse)), gate(detail::decode_rnn_act(r, Gru::gate_activation)), candidate(detail::decode_rnn_act(r, Gru::activation)) {}
  };

  static OpDef def() {
    return OpDef(type, "GRU over the sequences of Input (projected to 3D), all sequences batched per time step")
        .in(input, none, "[T, 3D] with LoD").in(h0, dispensable, "[S, D] initial hidden state").in(weight, none, "[D, 3D]: W_ur [D, 2D] then W_c [D, D]")
        .in(bias, dispensable, "[1, 3D]")
        .out(batch_gate, intermediate).out(batch_reset_hidden_prev, intermediate).out(batch_hidden, intermediate).out(hidden)
        .attr(activation, std::string("tanh"), "the candidate's").check<std::string>(detail::valid_rnn_act, detail::kRnnActChoices)
        .attr(gate_activation, std::string("sigmoid"), "u and r's").check<std::string>(detail::valid_rnn_act, detail::kRnnActChoices)
        .attr(is_reverse, false, "run each sequence from its end");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(input);
    const Shape& ws = c.shape(weight);
    c.check(is_float(c.dtype(input)), "Input must be a floating-point tensor, got {}", name(c.dtype(input)));
    c.check(ws.rank() == 2 && ws[0] > 0 && dims_compatible(ws[1], 3 * ws[0]), "Weight must be [D, 3D] with a known D, got {}", ws.str());
    const int64_t d = ws[0];
    c.check(xs.rank() == 2 && dims_compatible(xs[1], 3 * d), "Input must be [T, 3D] = [T, {}] (Weight is {}), got {}", 3 * d, ws.str(), xs.str());
    if (c.has_input(bias)) detail::rnn_check_matrix(c, bias, 1, 3 * d, "");
    if (c.has_input(h0)) detail::rnn_check_matrix(c, h0, -1, d, "");
    const DType t = c.dtype(input);
    c.set_output(hidden, Shape{xs[0], d}, t);
    c.set_output(batch_gate, Shape{xs[0], 3 * d}, t);
    c.set_output(batch_reset_hidden_prev, Shape{xs[0], d}, t);
    c.set_output(batch_hidden, Shape{xs[0], d}, t);
    c.share_lod(input, hidden);
  }
  /// gru_grad(Weight, H0?, Hidden, BatchGate, BatchResetHiddenPrev, BatchHidden, Hidden@GRAD)
  ///   -> Input@GRAD, Weight@GRAD, Bias@GRAD, H0@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op = g.grad_op({.inputs = {weight},
                             .outputs = {hidden, batch_gate, batch_reset_hidden_prev, batch_hidden},
                             .output_grads = {hidden},
                             .input_grads = {input, weight}});
    detail::rnn_grad_optional(g, op, bias, bias_grad, false);
    detail::rnn_grad_optional(g, op, h0, h0_grad);
    return {op};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/gru.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/gru.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/rnn.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/rnn.hpp
};

}  // namespace oar::ops
