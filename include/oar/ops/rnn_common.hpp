// oar/ops/rnn_common.hpp: what the recurrent ops (lstm, gru, lstm_unit, gru_unit) share: the activations their
// attributes name, decoded once at prepare into RnnAct, and the grad makers' common steps.
#pragma once
#include <string_view>

#include "oar/ops/op.hpp"

namespace oar {

/// An activation of a recurrent cell's gates or candidate. The values are Fluid's gru_unit integers.
enum class RnnAct : int32_t { identity = 0, sigmoid = 1, tanh = 2, relu = 3 };

/// "identity", "sigmoid", "tanh" or "relu".
constexpr std::string_view rnn_act_name(RnnAct a) {
  switch (a) {
    case RnnAct::identity: return "identity";
    case RnnAct::sigmoid: return "sigmoid";
    case RnnAct::tanh: return "tanh";
    case RnnAct::relu: return "relu";
  }
  return "?";
}

/// The activation named `s` ("" is identity, as Fluid's "linear"), or nullopt.
inline std::optional<RnnAct> rnn_act_from_name(std::string_view s) {
  if (s == "identity" || s == "linear" || s.empty()) return RnnAct::identity;
  if (s == "sigmoid") return RnnAct::sigmoid;
  if (s == "tanh") return RnnAct::tanh;
  if (s == "relu") return RnnAct::relu;
  return std::nullopt;
}

namespace ops::detail {

/// The schema check of a string activation attribute.
inline bool valid_rnn_act(const std::string& s) { return rnn_act_from_name(s).has_value(); }
inline constexpr const char* kRnnActChoices = "must be sigmoid, tanh, relu or identity";

/// Decodes string attribute `a` (checked by the schema; an oar::Error naming the op otherwise).
inline RnnAct decode_rnn_act(const AttrReader& r, Attr<std::string> a) {
  const std::string s = r(a);
  if (auto v = rnn_act_from_name(s)) return *v;
  throw Error(fmt::format("{}: {} '{}' {}", r.op().type(), a.name, s, kRnnActChoices), r.op().origin());
}
/// Decodes int attribute `a` (Fluid's gru_unit: 0 identity, 1 sigmoid, 2 tanh, 3 relu).
inline RnnAct decode_rnn_act(const AttrReader& r, Attr<int32_t> a) {
  const int32_t v = r(a);
  if (v < 0 || v > 3)
    throw Error(fmt::format("{}: {} = {} must be 0 (identity), 1 (sigmoid), 2 (tanh) or 3 (relu)", r.op().type(), a.name, v), r.op().origin());
  return RnnAct(v);
}

/// Binds forward input `slot` and its gradient `grad_slot` when the forward op has it.
inline void rnn_grad_optional(const GradContext& g, Operator& op, Slot slot, Slot grad_slot, bool bind_input = true) {
  if (g.input(slot).empty()) return;
  if (bind_input) op.set_input(slot, g.input(slot));
  op.set_output(grad_slot, g.input_grad(slot));
}

/// Checks a 2-D shape [rows, cols] where rows/cols < 0 mean "any"; `what` names it in the error.
inline void rnn_check_matrix(const InferShapeContext& c, Slot s, int64_t rows, int64_t cols, std::string_view what) {
  const Shape& sh = c.shape(s);
  bool ok = sh.rank() == 2 && (rows < 0 || dims_compatible(sh[0], rows)) && (cols < 0 || dims_compatible(sh[1], cols));
  c.check(ok, "{} must be {}{}[{}, {}], got {}", s.name, what, what.empty() ? "" : " ", rows < 0 ? std::string("N") : std::to_string(rows),
          cols < 0 ? std::string("?") : std::to_string(cols), sh.str());
}

}  // namespace ops::detail

}  // namespace oar
