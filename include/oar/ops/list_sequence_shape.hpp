// oar/ops/list_sequence_shape.hpp: the op list of the sequence ops that window or re-cut sequences: sequence_conv, sequence_reshape, sequence_slice, sequence_pad, sequence_unpad (joined in ops/op_list.hpp).
#pragma once
#include "oar/ops/op.hpp"
#include "oar/ops/sequence_conv.hpp"
#include "oar/ops/sequence_pad.hpp"
#include "oar/ops/sequence_reshape.hpp"
#include "oar/ops/sequence_slice.hpp"

namespace oar {

using SequenceShapeOps = op_list<ops::SequenceConv, ops::SequenceReshape, ops::SequenceSlice, ops::SequencePad, ops::SequenceUnpad>;

}  // namespace oar
