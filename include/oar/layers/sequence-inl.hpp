// oar/layers/sequence-inl.hpp: the implementation of sequence.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/sequence.hpp"

#include "oar/layers/op_layer.hpp"
#include "oar/ops/lod_reset.hpp"
#include "oar/ops/sequence_concat.hpp"
#include "oar/ops/sequence_expand.hpp"
#include "oar/ops/sequence_mask.hpp"
#include "oar/ops/sequence_pool.hpp"
#include "oar/ops/sequence_softmax.hpp"

namespace oar {

namespace detail {

/// The pooltype attribute's value for `t` (Fluid's upper-case names).
inline const char* pooltype_name(SequencePoolType t) {
  switch (t) {
    case SequencePoolType::average: return "AVERAGE";
    case SequencePoolType::sum: return "SUM";
    case SequencePoolType::sqrt: return "SQRT";
    case SequencePoolType::max: return "MAX";
    case SequencePoolType::last: return "LAST";
    case SequencePoolType::first: return "FIRST";
  }
  return "AVERAGE";
}

OAR_FUNC Var record_sequence_pool(std::string kind, const Var& x, SequencePoolType type, std::source_location loc) {
  using P = ops::SequencePool;
  // MaxIndex only for MAX, whose grad reads it: for the other pooltypes it would be an empty tensor made anew
  // on every run.
  std::vector<OutSpec> outs{{P::out}};
  if (type == SequencePoolType::max) outs.push_back({P::max_index, DType::i32, true});
  return record_op_layer(std::move(kind), P::type, {{P::x, {x}}}, {{std::string(P::pooltype.name), std::string(pooltype_name(type))}}, std::move(outs),
                         loc)[0];
}

}  // namespace detail

OAR_FUNC Var sequence_pool(const Var& x, SequencePoolType type, std::source_location loc) { return detail::record_sequence_pool("sequence_pool", x, type, loc); }
OAR_FUNC Var sequence_first_step(const Var& x, std::source_location loc) {
  return detail::record_sequence_pool("sequence_first_step", x, SequencePoolType::first, loc);
}
OAR_FUNC Var sequence_last_step(const Var& x, std::source_location loc) {
  return detail::record_sequence_pool("sequence_last_step", x, SequencePoolType::last, loc);
}

OAR_FUNC Var sequence_softmax(const Var& x, std::source_location loc) { return record_unary_layer<ops::SequenceSoftmax>(x, {}, loc); }

OAR_FUNC SequenceExpandLayer sequence_expand(const Var& x, const Var& y, std::source_location loc) {
  using E = ops::SequenceExpand;
  // ref_level reaches the op through apply_options.
  return SequenceExpandLayer(record_op_layer("sequence_expand", E::type, {{E::x, {x}}, {E::y, {y}}}, {}, {{E::out}}, loc)[0]);
}

OAR_FUNC Var sequence_concat(std::vector<Var> xs, std::source_location loc) {
  OAR_CHECK(!xs.empty(), "sequence_concat: needs at least one input");
  using C = ops::SequenceConcat;
  return record_op_layer("sequence_concat", C::type, {{C::x, std::move(xs)}}, {}, {{C::out}}, loc)[0];
}

OAR_FUNC Var lod_reset(const Var& x, const Var& y, std::source_location loc) {
  using L = ops::LoDReset;
  return record_op_layer("lod_reset", L::type, {{L::x, {x}}, {L::y, {y}}}, {}, {{L::out}}, loc)[0];
}

OAR_FUNC Var lod_reset(const Var& x, std::vector<int32_t> target_lod, std::source_location loc) {
  OAR_CHECK(target_lod.size() >= 1 && target_lod[0] == 0, "lod_reset: target_lod must start at 0, got [{}]", fmt::join(target_lod, ", "));
  using L = ops::LoDReset;
  return record_op_layer("lod_reset", L::type, {{L::x, {x}}}, {{std::string(L::target_lod.name), std::move(target_lod)}}, {{L::out}}, loc)[0];
}

OAR_FUNC SequenceMaskLayer sequence_mask(const Var& lengths, std::source_location loc) {
  using M = ops::SequenceMask;
  // maxlen and out_dtype reach the op through apply_options; infer_shape gives the mask its dtype.
  return SequenceMaskLayer(record_op_layer("sequence_mask", M::type, {{M::x, {lengths}}}, {}, {{M::y, {}, true}}, loc)[0]);
}

}  // namespace oar
