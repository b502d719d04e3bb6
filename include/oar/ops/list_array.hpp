// oar/ops/list_array.hpp: the op list of the ops While loops and DynamicRNN are built from (joined in
// ops/op_list.hpp): the comparisons and logical ops, the tensor-array ops and the rank-table ops.
#pragma once
#include "oar/ops/compare.hpp"
#include "oar/ops/lod_rank_table.hpp"
#include "oar/ops/op.hpp"
#include "oar/ops/tensor_array.hpp"

namespace oar {

#define OAR_ARRAY_OP_TYPE(type, Op, Functor) ops::Op,
using ArrayOps = op_list<OAR_COMPARE_OPS(OAR_ARRAY_OP_TYPE) OAR_LOGICAL_BINARY_OPS(OAR_ARRAY_OP_TYPE) ops::LogicalNot, ops::WriteToArray, ops::ReadFromArray,
                         ops::LoDArrayLength, ops::LoDRankTable, ops::MaxSequenceLen, ops::LoDTensorToArray, ops::ArrayToLoDTensor, ops::ShrinkRNNMemory,
                         ops::ReorderLoDTensorByRank>;
#undef OAR_ARRAY_OP_TYPE

}  // namespace oar
