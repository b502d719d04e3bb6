// oar/ops/list_sequence.hpp: the op list of the sequence ops over LoD tensors: sequence_pool, sequence_softmax, sequence_expand, sequence_concat, lod_reset, sequence_mask, split_lod_tensor and merge_lod_tensor (joined in ops/op_list.hpp).
#pragma once
#include "oar/ops/lod_reset.hpp"
#include "oar/ops/op.hpp"
#include "oar/ops/sequence_concat.hpp"
#include "oar/ops/sequence_expand.hpp"
#include "oar/ops/sequence_mask.hpp"
#include "oar/ops/sequence_pool.hpp"
#include "oar/ops/sequence_softmax.hpp"
#include "oar/ops/split_merge_lod_tensor.hpp"

namespace oar {

using SequenceOps = op_list<ops::SequencePool, ops::SequenceSoftmax, ops::SequenceExpand, ops::SequenceConcat, ops::LoDReset, ops::SequenceMask,
                           ops::SplitLoDTensor, ops::MergeLoDTensor>;

}  // namespace oar
