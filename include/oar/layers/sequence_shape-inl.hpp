// oar/layers/sequence_shape-inl.hpp: the implementation of sequence_shape.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/sequence_shape.hpp"

#include "oar/layers/op_layer.hpp"
#include "oar/ops/sequence_conv.hpp"
#include "oar/ops/sequence_pad.hpp"
#include "oar/ops/sequence_reshape.hpp"
#include "oar/ops/sequence_slice.hpp"
#include "oar/tape/replay.hpp"

namespace oar {

OAR_FUNC SequenceConvLayer sequence_conv(const Var& x, int64_t num_filters, int64_t filter_size, std::source_location loc) {
  OAR_CHECK(num_filters > 0 && filter_size > 0, "sequence_conv: num_filters and filter_size must be positive, got {} and {}", num_filters, filter_size);
  auto replay = [num_filters, filter_size](LayerHelper& h) {
    const Variable& xv = h.input_var();
    if (xv.shape().rank() != 2 || xv.shape()[1] < 0)
      throw Error(fmt::format("sequence_conv: input {} must be [N, D] with a known D, got {}", xv.name(), xv.shape().str()), h.origin());
    const int64_t d = xv.shape()[1];
    Variable& w = h.create_parameter(h.param_attr(), Shape{filter_size * d, num_filters}, xv.dtype(), false);
    Variable& out = h.create_tmp(xv.dtype());
    using C = ops::SequenceConv;
    Operator op{std::string(C::type)};
    op.set_input(C::x, {xv.name()}).set_input(C::filter, {w.name()}).set_output(C::out, {out.name()});
    op.set_attr(C::context_length, int32_t(filter_size)).set_attr(C::context_start, int32_t(-(filter_size / 2)));
    h.apply_options(op);  // contextStart (the typed option), and contextStride / paddingTrainable through .set
    h.append_op(std::move(op));
    return std::vector<std::string>{h.append_activation(h.append_bias(out.name(), 1))};
  };
  return SequenceConvLayer(record_layer("sequence_conv", {x}, std::move(replay), loc)[0]);
}

OAR_FUNC Var sequence_reshape(const Var& x, int64_t new_dim, std::source_location loc) {
  OAR_CHECK(new_dim > 0, "sequence_reshape: new_dim must be positive, got {}", new_dim);
  using R = ops::SequenceReshape;
  return record_op_layer("sequence_reshape", R::type, {{R::x, {x}}}, {{R::new_dim, int32_t(new_dim)}}, {{R::out}}, loc)[0];
}

OAR_FUNC Var sequence_slice(const Var& x, const Var& offset, const Var& length, std::source_location loc) {
  using S = ops::SequenceSlice;
  return record_op_layer("sequence_slice", S::type, {{S::x, {x}}, {S::offset, {offset}}, {S::length, {length}}}, {}, {{S::out}}, loc)[0];
}

OAR_FUNC SequencePadLayer sequence_pad(const Var& x, const Var& pad_value, std::source_location loc) {
  using P = ops::SequencePad;
  auto v = record_op_layer("sequence_pad", P::type, {{P::x, {x}}, {P::pad_value, {pad_value}}}, {}, {{P::out}, {P::length, DType::i64, true}}, loc);
  return SequencePadLayer(v[0], v[1]);
}

OAR_FUNC Var sequence_unpad(const Var& x, const Var& length, std::source_location loc) {
  using U = ops::SequenceUnpad;
  return record_op_layer("sequence_unpad", U::type, {{U::x, {x}}, {U::length, {length}}}, {}, {{U::out}}, loc)[0];
}

OAR_FUNC Var sequence_conv_pool(const Var& x, int64_t num_filters, int64_t filter_size, const Activation& act, SequencePoolType pool,
                                std::source_location loc) {
  return sequence_pool(sequence_conv(x, num_filters, filter_size, loc).act(act), pool, loc);
}

}  // namespace oar
