// oar/layers/recurrent.hpp: the layer functions of the recurrent cells: dynamic_lstm and dynamic_gru over the
// sequences of a LoD tensor, lstm_unit and gru_unit for one step. Each returns the hidden state as a Var whose
// typed options are fluent setters (`oar::dynamic_lstm(x, 4 * d).use_peepholes(false).is_reverse()`); the other
// states are accessors of that result (`.cell()`). Bodies in recurrent-inl.hpp; the ops are ops/{lstm,gru,
// lstm_unit,gru_unit}.hpp, whose comments give the gate order and the weights' layouts.
#pragma once
#include <source_location>
#include <string>

#include "oar/layers/layer_var.hpp"
#include "oar/ops/gru.hpp"
#include "oar/ops/gru_unit.hpp"
#include "oar/ops/lstm.hpp"
#include "oar/ops/lstm_unit.hpp"
#include "oar/ops/rnn_common.hpp"

namespace oar {

/// dynamic_lstm's result: the hidden states [T, D] (the input's LoD); `.cell()` is the cell states [T, D].
/// Options: `.use_peepholes(b)` (default true), `.is_reverse()`, `.gate_activation(a)` (sigmoid),
/// `.cell_activation(a)` (tanh), `.candidate_activation(a)` (tanh), and `.param` (Weight), `.bias` (Bias;
/// `.bias(false)` needs `.use_peepholes(false)`), `.name`.
class DynamicLstmLayer : public LayerVar<DynamicLstmLayer> {
 public:
  DynamicLstmLayer() = default;
  DynamicLstmLayer(const Var& hidden, const Var& cell) : LayerVar(hidden), cell_(cell) {}
  struct keys {
    static constexpr Attr<bool> use_peepholes = ops::Lstm::use_peepholes, is_reverse = ops::Lstm::is_reverse;
    static constexpr Attr<std::string> gate_activation = ops::Lstm::gate_activation, cell_activation = ops::Lstm::cell_activation,
                                       candidate_activation = ops::Lstm::candidate_activation;
  };
  /// The diagonal peephole weights W_ic, W_fc, W_oc (Bias grows from [1, 4D] to [1, 7D]).
  DynamicLstmLayer& use_peepholes(bool on = true) { return option(keys::use_peepholes, on); }
  /// Runs each sequence from its last row to its first.
  DynamicLstmLayer& is_reverse(bool on = true) { return option(keys::is_reverse, on); }
  /// Of the input, forget and output gates.
  DynamicLstmLayer& gate_activation(RnnAct a) { return option(keys::gate_activation, std::string(rnn_act_name(a))); }
  /// Applied to the cell state before the output gate.
  DynamicLstmLayer& cell_activation(RnnAct a) { return option(keys::cell_activation, std::string(rnn_act_name(a))); }
  /// Of the candidate cell c~.
  DynamicLstmLayer& candidate_activation(RnnAct a) { return option(keys::candidate_activation, std::string(rnn_act_name(a))); }
  /// The hidden states h_t (this Var itself).
  const Var& hidden() const { return *this; }
  /// The cell states c_t [T, D], with the input's LoD.
  const Var& cell() const { return cell_; }

 private:
  Var cell_;
};

/// LSTM over every sequence of x, whose input projection is already done (Fluid's dynamic_lstm: x is the
/// output of an fc to size = 4D). With gates [c~ | i | f | o] in that column order, per sequence from
/// h_{-1} = h0 (or 0), c_{-1} = c0 (or 0):
///   a = x_t + h_{t-1} W + b,  i = gate(a_i + w_ic * c_{t-1}),  f = gate(a_f + w_fc * c_{t-1}),  c~ = cand(a_c)
///   c_t = f * c_{t-1} + i * c~,  o = gate(a_o + w_oc * c_t),  h_t = o * cell(c_t)
/// x: [T, 4D] with LoD -> hidden, cell [T, D] with x's LoD; W [D, 4D] (Xavier), b [1, 4D] or, with peepholes,
/// [1, 7D] = [b | w_ic | w_fc | w_oc] (zeros). h0, c0: [S, D], one row per sequence in LoD order; an empty
/// Var leaves either out.
///   auto h = oar::dynamic_lstm(oar::fc(words, 4 * 64), 4 * 64).use_peepholes(false);  // h.cell() is c
DynamicLstmLayer dynamic_lstm(const Var& x, int64_t size, std::source_location loc = std::source_location::current());
DynamicLstmLayer dynamic_lstm(const Var& x, int64_t size, const Var& h0, const Var& c0, std::source_location loc = std::source_location::current());

/// dynamic_gru's result: the hidden states [T, D] (the input's LoD).
/// Options: `.is_reverse()`, `.gate_activation(a)` (sigmoid), `.candidate_activation(a)` (tanh), and `.param`
/// (Weight), `.bias` (`.bias(false)` drops it), `.name`.
class DynamicGruLayer : public LayerVar<DynamicGruLayer> {
 public:
  using LayerVar::LayerVar;
  struct keys {
    static constexpr Attr<bool> is_reverse = ops::Gru::is_reverse;
    static constexpr Attr<std::string> gate_activation = ops::Gru::gate_activation, candidate_activation = ops::Gru::activation;
  };
  /// Runs each sequence from its last row to its first.
  DynamicGruLayer& is_reverse(bool on = true) { return option(keys::is_reverse, on); }
  /// Of the update and reset gates.
  DynamicGruLayer& gate_activation(RnnAct a) { return option(keys::gate_activation, std::string(rnn_act_name(a))); }
  /// Of the candidate state.
  DynamicGruLayer& candidate_activation(RnnAct a) { return option(keys::candidate_activation, std::string(rnn_act_name(a))); }
};

/// GRU over every sequence of x, whose input projection is already done (Fluid's dynamic_gru: x is the output
/// of an fc to 3D; size = D). With columns [u | r | c], per sequence from h_{-1} = h0 (or 0):
///   [u, r] = gate(x_ur + h_{t-1} W_ur + b_ur),  c = cand(x_c + (r * h_{t-1}) W_c + b_c)
///   h_t = (1 - u) * h_{t-1} + u * c
/// x: [T, 3D] with LoD -> [T, D] with x's LoD; W [D, 3D] (Xavier) stored as W_ur [D, 2D] then W_c [D, D];
/// b [1, 3D] (zeros); h0 [S, D], one row per sequence in LoD order (an empty Var leaves it out).
///   auto h = oar::dynamic_gru(oar::fc(words, 3 * 64), 64).is_reverse();
DynamicGruLayer dynamic_gru(const Var& x, int64_t size, std::source_location loc = std::source_location::current());
DynamicGruLayer dynamic_gru(const Var& x, int64_t size, const Var& h0, std::source_location loc = std::source_location::current());

/// lstm_unit's result: the hidden state [N, D]; `.cell()` is the cell state [N, D].
/// Options: `.forget_bias(v)` (default 0), and `.param` / `.bias` of the projection, `.name`.
class LstmUnitLayer : public LayerVar<LstmUnitLayer> {
 public:
  LstmUnitLayer() = default;
  LstmUnitLayer(const Var& hidden, const Var& cell) : LayerVar(hidden), cell_(cell) {}
  struct keys {
    static constexpr Attr<float> forget_bias = ops::LstmUnit::forget_bias;
  };
  /// Added to the forget gate's input (1 keeps the cell early in training).
  LstmUnitLayer& forget_bias(double v) { return option(keys::forget_bias, float(v)); }
  /// The hidden state h (this Var itself).
  const Var& hidden() const { return *this; }
  /// The cell state c [N, D].
  const Var& cell() const { return cell_; }

 private:
  Var cell_;
};

/// One LSTM step (Fluid's lstm_unit): an fc of [x_t, h_prev] to 4D, columns [i | f | o | g], then
///   i = sigmoid(.), f = sigmoid(. + forget_bias), o = sigmoid(.), g = tanh(.)
///   c = f * c_prev + i * g,  h = o * tanh(c)
/// x_t [N, M], h_prev [N, D], c_prev [N, D] -> h, c [N, D]; the fc's W is [M + D, 4D] (Xavier), b [4D] (zeros).
///   auto step = oar::lstm_unit(x, h, c).forget_bias(1.0);  // step.cell() is the new c
LstmUnitLayer lstm_unit(const Var& x_t, const Var& h_prev, const Var& c_prev, std::source_location loc = std::source_location::current());

/// gru_unit's result: the new hidden state [N, D]; `.gate()` is the activated gates [u, r, c] [N, 3D] and
/// `.reset_hidden_prev()` is r * hidden_prev [N, D].
/// Options: `.gate_activation(a)` (sigmoid), `.candidate_activation(a)` (tanh), and `.param` (Weight), `.bias`
/// (`.bias(false)` drops it), `.name`.
class GruUnitLayer : public LayerVar<GruUnitLayer> {
 public:
  GruUnitLayer() = default;
  GruUnitLayer(const Var& hidden, const Var& reset_hidden_prev, const Var& gate) : LayerVar(hidden), reset_hidden_prev_(reset_hidden_prev), gate_(gate) {}
  struct keys {
    static constexpr Attr<int32_t> gate_activation = ops::GruUnit::gate_activation, candidate_activation = ops::GruUnit::activation;
  };
  /// Of the update and reset gates.
  GruUnitLayer& gate_activation(RnnAct a) { return option(keys::gate_activation, int32_t(a)); }
  /// Of the candidate state.
  GruUnitLayer& candidate_activation(RnnAct a) { return option(keys::candidate_activation, int32_t(a)); }
  /// The new hidden state (this Var itself).
  const Var& hidden() const { return *this; }
  /// r * hidden_prev [N, D].
  const Var& reset_hidden_prev() const { return reset_hidden_prev_; }
  /// The activated [u, r, c] [N, 3D].
  const Var& gate() const { return gate_; }

 private:
  Var reset_hidden_prev_, gate_;
};

/// One GRU step (Fluid's gru_unit) on an input already projected to size = 3D: the math of dynamic_gru with
/// h_{t-1} = hidden_prev. input [N, 3D], hidden_prev [N, D] -> [N, D]; W [D, 3D] (Xavier), b [1, 3D] (zeros).
///   auto h = oar::gru_unit(oar::fc(x, 3 * 32), h_prev, 3 * 32);
GruUnitLayer gru_unit(const Var& input, const Var& hidden_prev, int64_t size, std::source_location loc = std::source_location::current());

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/recurrent-inl.hpp"
#endif
