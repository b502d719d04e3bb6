// oar/ops/list_optim.hpp: the optim family's part of the op list (joined in ops/op_list.hpp): the parameter
// update ops of ops/optimizers.hpp.
#pragma once
#include "oar/ops/op.hpp"
#include "oar/ops/amp.hpp"
#include "oar/ops/optimizers.hpp"

namespace oar {

using OptimOps = op_list<ops::Sgd, ops::Momentum, ops::Adagrad, ops::DecayedAdagrad, ops::Adam, ops::AdamW, ops::Adamax,
                         ops::Rmsprop, ops::Adadelta, ops::Lamb>;
/// The ops of dynamic loss scaling (ops/amp.hpp), which mixed-precision training adds to the update program.
using AmpOps = op_list<ops::CheckFiniteAndUnscale, ops::UpdateLossScaling>;

}  // namespace oar
