// oar/layers/recurrent-inl.hpp: the implementation of recurrent.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/recurrent.hpp"

#include "oar/ops/concat.hpp"
#include "oar/ops/gru.hpp"
#include "oar/ops/gru_unit.hpp"
#include "oar/ops/lstm.hpp"
#include "oar/ops/lstm_unit.hpp"
#include "oar/ops/mul.hpp"
#include "oar/tape/replay.hpp"

namespace oar {

namespace detail {

/// The recurrent layers apply no activation of their own: `.act(...)` on one is a mistake, not a no-op.
OAR_FUNC void rnn_reject_act(LayerHelper& h) {
  if (!h.creation().opts.act.empty())
    throw Error(fmt::format("{}: takes no .act(...); its activations are the gate / cell / candidate options", h.kind()), h.origin());
}

/// Checks that input `i` is a matrix whose columns are `cols` (when known).
OAR_FUNC void rnn_check_input_cols(LayerHelper& h, size_t i, int64_t cols, std::string_view what) {
  const Variable& v = h.input_var(i);
  if (v.shape().rank() != 2 || !dims_compatible(v.shape()[1], cols))
    throw Error(fmt::format("{}: {} must be [N, {}], got {} {}", h.kind(), what, cols, v.name(), v.shape().str()), h.origin());
}

OAR_FUNC DynamicLstmLayer record_dynamic_lstm(const Var& x, int64_t size, const Var* h0, const Var* c0, std::source_location loc) {
  OAR_CHECK(size > 0 && size % 4 == 0, "dynamic_lstm: size must be 4 * D (the projected input's width), got {}", size);
  std::vector<Var> inputs{x};
  const bool has_h0 = h0 && h0->valid(), has_c0 = c0 && c0->valid();
  if (has_h0) inputs.push_back(*h0);
  if (has_c0) inputs.push_back(*c0);
  auto replay = [size, has_h0, has_c0](LayerHelper& h) {
    using L = ops::Lstm;
    using K = DynamicLstmLayer::keys;
    rnn_reject_act(h);
    const int64_t d = size / 4;
    rnn_check_input_cols(h, 0, size, "x (the projected input, size = 4D)");
    const DType dtype = h.input_dtype();
    const bool peep = h.option<bool>(std::string(K::use_peepholes.name), true);
    Variable& w = h.create_parameter(h.param_attr(), Shape{d, 4 * d}, dtype, false);
    Operator op{std::string(L::type)};
    op.set_input(L::input, {h.input(0)}).set_input(L::weight, {w.name()});
    const ParamAttr battr = h.bias_attr();
    if (battr.enabled) op.set_input(L::bias, {h.create_parameter(battr, Shape{1, (peep ? 7 : 4) * d}, dtype, true).name()});
    size_t next = 1;
    if (has_h0) op.set_input(L::h0, {h.input(next++)});
    if (has_c0) op.set_input(L::c0, {h.input(next++)});
    Variable& hidden = h.create_tmp(dtype);
    Variable& cell = h.create_tmp(dtype);
    Variable& gate = h.create_tmp(dtype, true);
    Variable& pre = h.create_tmp(dtype, true);
    op.set_output(L::hidden, {hidden.name()}).set_output(L::cell, {cell.name()});
    op.set_output(L::batch_gate, {gate.name()}).set_output(L::batch_cell_pre_act, {pre.name()});
    op.set_attr(L::use_peepholes, peep);
    op.set_attr(L::is_reverse, h.option<bool>(std::string(K::is_reverse.name), false));
    op.set_attr(L::gate_activation, h.option<std::string>(std::string(K::gate_activation.name), "sigmoid"));
    op.set_attr(L::cell_activation, h.option<std::string>(std::string(K::cell_activation.name), "tanh"));
    op.set_attr(L::candidate_activation, h.option<std::string>(std::string(K::candidate_activation.name), "tanh"));
    h.append_op(std::move(op));
    return std::vector<std::string>{hidden.name(), cell.name()};
  };
  std::vector<Var> outs = record_layer("dynamic_lstm", std::move(inputs), std::move(replay), loc, 2);
  return DynamicLstmLayer(outs[0], outs[1]);
}

OAR_FUNC DynamicGruLayer record_dynamic_gru(const Var& x, int64_t size, const Var* h0, std::source_location loc) {
  OAR_CHECK(size > 0, "dynamic_gru: size must be D > 0 (the input is [T, 3D]), got {}", size);
  std::vector<Var> inputs{x};
  const bool has_h0 = h0 && h0->valid();
  if (has_h0) inputs.push_back(*h0);
  auto replay = [d = size, has_h0](LayerHelper& h) {
    using G = ops::Gru;
    using K = DynamicGruLayer::keys;
    rnn_reject_act(h);
    rnn_check_input_cols(h, 0, 3 * d, "x (the projected input, 3 * size)");
    const DType dtype = h.input_dtype();
    Variable& w = h.create_parameter(h.param_attr(), Shape{d, 3 * d}, dtype, false);
    Operator op{std::string(G::type)};
    op.set_input(G::input, {h.input(0)}).set_input(G::weight, {w.name()});
    const ParamAttr battr = h.bias_attr();
    if (battr.enabled) op.set_input(G::bias, {h.create_parameter(battr, Shape{1, 3 * d}, dtype, true).name()});
    if (has_h0) op.set_input(G::h0, {h.input(1)});
    Variable& hidden = h.create_tmp(dtype);
    op.set_output(G::hidden, {hidden.name()});
    op.set_output(G::batch_gate, {h.create_tmp(dtype, true).name()});
    op.set_output(G::batch_reset_hidden_prev, {h.create_tmp(dtype, true).name()});
    op.set_output(G::batch_hidden, {h.create_tmp(dtype, true).name()});
    op.set_attr(G::is_reverse, h.option<bool>(std::string(K::is_reverse.name), false));
    op.set_attr(G::gate_activation, h.option<std::string>(std::string(K::gate_activation.name), "sigmoid"));
    op.set_attr(G::activation, h.option<std::string>(std::string(K::candidate_activation.name), "tanh"));
    h.append_op(std::move(op));
    return std::vector<std::string>{hidden.name()};
  };
  return DynamicGruLayer(record_layer("dynamic_gru", std::move(inputs), std::move(replay), loc)[0]);
}

}  // namespace detail

OAR_FUNC DynamicLstmLayer dynamic_lstm(const Var& x, int64_t size, std::source_location loc) { return detail::record_dynamic_lstm(x, size, nullptr, nullptr, loc); }
OAR_FUNC DynamicLstmLayer dynamic_lstm(const Var& x, int64_t size, const Var& h0, const Var& c0, std::source_location loc) {
  return detail::record_dynamic_lstm(x, size, &h0, &c0, loc);
}

OAR_FUNC DynamicGruLayer dynamic_gru(const Var& x, int64_t size, std::source_location loc) { return detail::record_dynamic_gru(x, size, nullptr, loc); }
OAR_FUNC DynamicGruLayer dynamic_gru(const Var& x, int64_t size, const Var& h0, std::source_location loc) { return detail::record_dynamic_gru(x, size, &h0, loc); }

OAR_FUNC LstmUnitLayer lstm_unit(const Var& x_t, const Var& h_prev, const Var& c_prev, std::source_location loc) {
  auto replay = [](LayerHelper& h) {
    using U = ops::LstmUnit;
    detail::rnn_reject_act(h);
    const DType dtype = h.input_dtype();
    const Shape xs = h.input_var(0).shape(), hs = h.input_var(1).shape(), cs = h.input_var(2).shape();
    if (cs.rank() != 2 || cs[1] <= 0)
      throw Error(fmt::format("lstm_unit: c_prev must be [N, D] with a known D, got {}", cs.str()), h.origin());
    const int64_t d = cs[1];
    if (xs.rank() != 2 || xs[1] <= 0) throw Error(fmt::format("lstm_unit: x_t must be [N, M] with a known M, got {}", xs.str()), h.origin());
    if (hs.rank() != 2 || !dims_compatible(hs[1], d))
      throw Error(fmt::format("lstm_unit: h_prev must be [N, {}] like c_prev, got {}", d, hs.str()), h.origin());
    // Fluid's projection: one fc over [x_t, h_prev] joined on axis 1.
    Variable& joined = h.create_tmp(dtype);
    Operator cat{std::string(ops::Concat::type)};
    cat.set_input(ops::Concat::x, {h.input(0), h.input(1)}).set_output(ops::Concat::out, {joined.name()}).set_attr(ops::Concat::axis, int32_t(1));
    h.append_op(std::move(cat));
    Variable& w = h.create_parameter(h.param_attr(), Shape{xs[1] + d, 4 * d}, dtype, false);
    Variable& proj = h.create_tmp(dtype);
    using M = ops::Mul;
    Operator mul{std::string(M::type)};
    mul.set_input(M::x, {joined.name()}).set_input(M::y, {w.name()}).set_output(M::out, {proj.name()});
    mul.set_attr(M::x_num_col_dims, int32_t(1)).set_attr(M::y_num_col_dims, int32_t(1));
    h.append_op(std::move(mul));
    const std::string gates = h.append_bias(proj.name(), 1);
    Variable& c = h.create_tmp(dtype);
    Variable& hid = h.create_tmp(dtype);
    Operator op{std::string(U::type)};
    op.set_input(U::x, {gates}).set_input(U::c_prev, {h.input(2)}).set_output(U::c, {c.name()}).set_output(U::h, {hid.name()});
    op.set_attr(U::forget_bias, h.option<float>(std::string(LstmUnitLayer::keys::forget_bias.name), 0.0f));
    h.append_op(std::move(op));
    return std::vector<std::string>{hid.name(), c.name()};
  };
  std::vector<Var> outs = record_layer("lstm_unit", {x_t, h_prev, c_prev}, std::move(replay), loc, 2);
  return LstmUnitLayer(outs[0], outs[1]);
}

OAR_FUNC GruUnitLayer gru_unit(const Var& input, const Var& hidden_prev, int64_t size, std::source_location loc) {
  OAR_CHECK(size > 0 && size % 3 == 0, "gru_unit: size must be 3 * D (the projected input's width), got {}", size);
  auto replay = [size](LayerHelper& h) {
    using G = ops::GruUnit;
    using K = GruUnitLayer::keys;
    detail::rnn_reject_act(h);
    const int64_t d = size / 3;
    detail::rnn_check_input_cols(h, 0, size, "input (the projected input, size = 3D)");
    detail::rnn_check_input_cols(h, 1, d, "hidden_prev");
    const DType dtype = h.input_dtype();
    Variable& w = h.create_parameter(h.param_attr(), Shape{d, 3 * d}, dtype, false);
    Operator op{std::string(G::type)};
    op.set_input(G::input, {h.input(0)}).set_input(G::hidden_prev, {h.input(1)}).set_input(G::weight, {w.name()});
    const ParamAttr battr = h.bias_attr();
    if (battr.enabled) op.set_input(G::bias, {h.create_parameter(battr, Shape{1, 3 * d}, dtype, true).name()});
    Variable& gate = h.create_tmp(dtype);
    Variable& rhp = h.create_tmp(dtype);
    Variable& hid = h.create_tmp(dtype);
    op.set_output(G::gate, {gate.name()}).set_output(G::reset_hidden_prev, {rhp.name()}).set_output(G::hidden, {hid.name()});
    op.set_attr(G::gate_activation, h.option<int32_t>(std::string(K::gate_activation.name), int32_t(RnnAct::sigmoid)));
    op.set_attr(G::activation, h.option<int32_t>(std::string(K::candidate_activation.name), int32_t(RnnAct::tanh)));
    h.append_op(std::move(op));
    return std::vector<std::string>{hid.name(), rhp.name(), gate.name()};
  };
  std::vector<Var> outs = record_layer("gru_unit", {input, hidden_prev}, std::move(replay), loc, 3);
  return GruUnitLayer(outs[0], outs[1], outs[2]);
}

}  // namespace oar
