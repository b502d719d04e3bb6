// oar/layers/array-inl.hpp: the implementation of array.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/array.hpp"

#include "oar/layers/op_layer.hpp"
#include "oar/ops/lod_rank_table.hpp"
#include "oar/ops/tensor_array.hpp"
#include "oar/tape/replay.hpp"

namespace oar {

OAR_FUNC Var create_array(DType dtype, std::source_location loc) {
  auto replay = [dtype](LayerHelper& h) {
    Variable& v = h.create_tmp(dtype);
    v.set_kind(VarKind::lod_tensor_array);
    return std::vector<std::string>{v.name()};
  };
  return record_layer("create_array", {}, std::move(replay), loc)[0];
}

// NOTE: the write names the array's own variable as its output (an op may name an existing variable: add_op
// creates only the names it cannot find, in this block or the ones around it), and the layer returns that same
// name, so the returned Var is the array after the write while the tape orders reads of it after the write.
OAR_FUNC Var array_write(const Var& x, const Var& i, const Var& array, std::source_location loc) {
  auto replay = [](LayerHelper& h) {
    using W = ops::WriteToArray;
    const std::string& arr = h.input(2);
    if (h.input_var(2).kind() != VarKind::lod_tensor_array)
      throw Error(fmt::format("array_write: '{}' is not a tensor array (make one with oar::create_array)", arr), h.origin());
    Operator op{std::string(W::type)};
    op.set_input(W::x, {h.input(0)}).set_input(W::i, {h.input(1)}).set_output(W::out, {arr});
    h.append_op(std::move(op));
    return std::vector<std::string>{arr};
  };
  return record_layer("array_write", {x, i, array}, std::move(replay), loc)[0];
}

OAR_FUNC Var array_read(const Var& array, const Var& i, std::source_location loc) {
  using R = ops::ReadFromArray;
  return record_op_layer("array_read", R::type, {{std::string(R::x.name), {array}}, {std::string(R::i.name), {i}}}, {}, {{std::string(R::out.name)}}, loc)[0];
}

OAR_FUNC Var array_length(const Var& array, std::source_location loc) {
  using L = ops::LoDArrayLength;
  return record_op_layer("array_length", L::type, {{std::string(L::x.name), {array}}}, {}, {{std::string(L::out.name), DType::i64, true}}, loc)[0];
}

OAR_FUNC Var lod_rank_table(const Var& x, int level, std::source_location loc) {
  using T = ops::LoDRankTable;
  return record_op_layer("lod_rank_table", T::type, {{std::string(T::x.name), {x}}}, {{std::string(T::level.name), int32_t(level)}},
                         {{std::string(T::out.name), DType::i64, true}}, loc)[0];
}

OAR_FUNC Var max_sequence_len(const Var& table, std::source_location loc) {
  using M = ops::MaxSequenceLen;
  return record_op_layer("max_sequence_len", M::type, {{std::string(M::rank_table.name), {table}}}, {}, {{std::string(M::out.name), DType::i64, true}}, loc)[0];
}

OAR_FUNC Var lod_tensor_to_array(const Var& x, const Var& table, std::source_location loc) {
  using L = ops::LoDTensorToArray;
  return record_op_layer("lod_tensor_to_array", L::type, {{std::string(L::x.name), {x}}, {std::string(L::rank_table.name), {table}}}, {},
                         {{std::string(L::out.name)}}, loc)[0];
}

OAR_FUNC Var array_to_lod_tensor(const Var& x, const Var& table, std::source_location loc) {
  using A = ops::ArrayToLoDTensor;
  return record_op_layer("array_to_lod_tensor", A::type, {{std::string(A::x.name), {x}}, {std::string(A::rank_table.name), {table}}}, {},
                         {{std::string(A::out.name)}}, loc)[0];
}

OAR_FUNC Var shrink_memory(const Var& x, const Var& i, const Var& table, std::source_location loc) {
  using S = ops::ShrinkRNNMemory;
  return record_op_layer("shrink_memory", S::type,
                         {{std::string(S::x.name), {x}}, {std::string(S::i.name), {i}}, {std::string(S::rank_table.name), {table}}}, {},
                         {{std::string(S::out.name)}}, loc)[0];
}

OAR_FUNC Var reorder_lod_tensor_by_rank(const Var& x, const Var& table, std::source_location loc) {
  using R = ops::ReorderLoDTensorByRank;
  return record_op_layer("reorder_lod_tensor_by_rank", R::type, {{std::string(R::x.name), {x}}, {std::string(R::rank_table.name), {table}}}, {},
                         {{std::string(R::out.name)}}, loc)[0];
}

}  // namespace oar
