// oar/ops/list_nn.hpp: the nn family's part of the op list (joined in ops/op_list.hpp); the normalization
// ops keep their part in ops/list_nn_norm.hpp.
#pragma once
#include "oar/ops/attention.hpp"
#include "oar/ops/conv2d.hpp"
#include "oar/ops/conv2d_fusion.hpp"
#include "oar/ops/conv2d_transpose.hpp"
#include "oar/ops/list_nn_norm.hpp"
#include "oar/ops/op.hpp"
#include "oar/ops/pool2d.hpp"
#include "oar/ops/position.hpp"

namespace oar {

using NnOps = op_list_concat<op_list<ops::Conv2d, ops::Conv2dFusion, ops::Conv2dTranspose, ops::Pool2d, ops::ScaledDotProductAttention, ops::AddPositionEncoding, ops::RotaryPositionEmbedding, ops::KvCache>, NnNormOps>::type;

}  // namespace oar
