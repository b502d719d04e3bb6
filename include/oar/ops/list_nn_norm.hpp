// oar/ops/list_nn_norm.hpp: the normalization / loss / softmax part of the nn family's op list (joined in
// ops/list_nn.hpp): softmax, log_softmax, the cross entropies, accuracy, batch_norm, layer_norm, dropout.
#pragma once
#include "oar/ops/accuracy.hpp"
#include "oar/ops/batch_norm.hpp"
#include "oar/ops/cross_entropy.hpp"
#include "oar/ops/dropout.hpp"
#include "oar/ops/layer_norm.hpp"
#include "oar/ops/op.hpp"
#include "oar/ops/sigmoid_cross_entropy_with_logits.hpp"
#include "oar/ops/softmax.hpp"
#include "oar/ops/softmax_with_cross_entropy.hpp"

namespace oar {

using NnNormOps = op_list<ops::Softmax, ops::LogSoftmax, ops::CrossEntropy, ops::SoftmaxWithCrossEntropy, ops::SigmoidCrossEntropyWithLogits,
                          ops::Accuracy, ops::BatchNorm, ops::SyncBatchNorm, ops::LayerNorm, ops::Dropout>;

}  // namespace oar
