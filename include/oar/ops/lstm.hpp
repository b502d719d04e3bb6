// oar/ops/lstm.hpp: lstm, Fluid's dynamic LSTM over the sequences of a LoD tensor whose input projection is
// already done (an fc to 4D). Kernels in kernels/cpu/lstm.hpp: every time step of all sequences at once (one
// gemm per step in Fluid's batch layout, kernels/cpu/rnn_batch.hpp).
#pragma once
#include "oar/ops/rnn_common.hpp"

namespace oar::ops {

/// Gate order: the 4D columns of Input, Weight and Bias are [candidate c~ | input i | forget f | output o]
/// (Fluid's bias {b_c, b_i, b_f, b_o}); with peepholes Bias has 3D more: the diagonal W_ic, W_fc, W_oc.
/// Per sequence (read backwards with is_reverse), from h_{-1} = H0 (or 0), c_{-1} = C0 (or 0):
///   a = x_t + h_{t-1} Weight + b
///   i = gate_act(a_i + W_ic * c_{t-1}),  f = gate_act(a_f + W_fc * c_{t-1}),  c~ = cand_act(a_c)
///   c_t = f * c_{t-1} + i * c~,  o = gate_act(a_o + W_oc * c_t),  h_t = o * cell_act(c_t)
/// Input [T, 4D] (LoD: the last level gives the sequences), Weight [D, 4D], Bias [1, 4D] or [1, 7D],
/// H0, C0 [S, D] (S sequences, in LoD order) -> Hidden, Cell [T, D] (Input's LoD), BatchGate [T, 4D] (the
/// activated gates [c~, i, f, o]) and BatchCellPreAct [T, D] (c_t), both in the batch layout, for the grad.
struct Lstm {
  static constexpr std::string_view type = "lstm";
  static constexpr Slot input{"Input"}, weight{"Weight"}, bias{"Bias"}, h0{"H0"}, c0{"C0"};
  static constexpr Slot hidden{"Hidden"}, cell{"Cell"}, batch_gate{"BatchGate"}, batch_cell_pre_act{"BatchCellPreAct"};
  static constexpr Slot input_grad{"Input@GRAD"}, weight_grad{"Weight@GRAD"}, bias_grad{"Bias@GRAD"}, h0_grad{"H0@GRAD"}, c0_grad{"C0@GRAD"};
  static constexpr Slot hidden_grad{"Hidden@GRAD"}, cell_grad{"Cell@GRAD"};
  static constexpr Attr<bool> use_peepholes{"use_peepholes"}, is_reverse{"is_reverse"};
  static constexpr Attr<std::string> gate_activation{"gate_activation"}, cell_activation{"cell_activation"},
      candidate_activation{"candidate_activation"};

  /// What the kernels read, decoded once when a program is prepared.
  struct Attrs {
    bool use_peepholes, is_reverse;
    RnnAct gate, cell, candidate;
    explicit Attrs(const AttrReader& r)
        : use_peepholes(r(Lstm::use_peepholes)),
          is_reverse(r(Lstm::is_reverse)),
          gate(detail::decode_rnn_act(r, Lstm::gate_activation)),
          cell(detail::decode_rnn_act(r, Lstm::cell_activation)),
          candidate(detail::decode_rnn_act(r, Lstm::candidate_activation)) {}
  };

  static OpDef def() {
    return OpDef(type, "LSTM over the sequences of Input (projected to 4D), all sequences batched per time step")
        .in(input, none, "[T, 4D] with LoD").in(weight, none, "[D, 4D]").in(bias, dispensable, "[1, 4D], or [1, 7D] with peepholes")
        .in(h0, dispensable, "[S, D] initial hidden state").in(c0, dispensable, "[S, D] initial cell state")
        .out(hidden).out(cell).out(batch_gate, intermediate).out(batch_cell_pre_act, intermediate)
        .attr(use_peepholes, true, "W_ic, W_fc, W_oc from Bias[4D:7D]")
        .attr(is_reverse, false, "run each sequence from its end")
        .attr(gate_activation, std::string("sigmoid")).check<std::string>(detail::valid_rnn_act, detail::kRnnActChoices)
        .attr(cell_activation, std::string("tanh")).check<std::string>(detail::valid_rnn_act, detail::kRnnActChoices)
        .attr(candidate_activation, std::string("tanh")).check<std::string>(detail::valid_rnn_act, detail::kRnnActChoices);
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(input);
    const Shape& ws = c.shape(weight);
    c.check(is_float(c.dtype(input)), "Input must be a floating-point tensor, got {}", name(c.dtype(input)));
    c.check(ws.rank() == 2 && ws[0] > 0 && dims_compatible(ws[1], 4 * ws[0]), "Weight must be [D, 4D] with a known D, got {}", ws.str());
    const int64_t d = ws[0];
    c.check(xs.rank() == 2 && dims_compatible(xs[1], 4 * d), "Input must be [T, 4D] = [T, {}] (Weight is {}), got {}", 4 * d, ws.str(), xs.str());
    const bool peep = c.attr(use_peepholes);
    if (c.has_input(bias)) detail::rnn_check_matrix(c, bias, 1, (peep ? 7 : 4) * d, peep ? "(with use_peepholes)" : "(without peepholes)");
    else c.check(!peep, "use_peepholes needs Bias: the peephole weights are its last 3D columns");
    if (c.has_input(h0)) detail::rnn_check_matrix(c, h0, -1, d, "");
    if (c.has_input(c0)) detail::rnn_check_matrix(c, c0, -1, d, "");
    const DType t = c.dtype(input);
    c.set_output(hidden, Shape{xs[0], d}, t);
    c.set_output(cell, Shape{xs[0], d}, t);
    c.set_output(batch_gate, Shape{xs[0], 4 * d}, t);
    c.set_output(batch_cell_pre_act, Shape{xs[0], d}, t);
    c.share_lod(input, hidden);
    c.share_lod(input, cell);
  }
  /// lstm_grad(Weight, Bias?, H0?, C0?, Hidden, BatchGate, BatchCellPreAct, Hidden@GRAD, Cell@GRAD)
  ///   -> Input@GRAD, Weight@GRAD, Bias@GRAD, H0@GRAD, C0@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op = g.grad_op({.inputs = {weight},
                             .outputs = {hidden, batch_gate, batch_cell_pre_act},
                             .output_grads = {hidden, cell},
                             .input_grads = {input, weight}});
    detail::rnn_grad_optional(g, op, bias, bias_grad);
    detail::rnn_grad_optional(g, op, h0, h0_grad);
    detail::rnn_grad_optional(g, op, c0, c0_grad);
    return {op};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/lstm.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/lstm.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/rnn.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/rnn.hpp
};

}  // namespace oar::ops
