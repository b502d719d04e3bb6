// oar/ops/op_list.hpp: THE list of op structs. Each family keeps its part in ops/list_<family>.hpp; this file
// joins them. The registries (schemas here, kernels in runtime/) are built from it on first use.
#pragma once
#include "oar/ops/control_flow.hpp"
#include "oar/ops/elementwise.hpp"
#include "oar/ops/feed_fetch.hpp"
#include "oar/ops/lr_schedule.hpp"
#include "oar/ops/list_math.hpp"
#include "oar/ops/list_nn.hpp"
#include "oar/ops/list_tensor.hpp"
#include "oar/ops/list_optim.hpp"
#include "oar/ops/list_array.hpp"
#include "oar/ops/list_collective.hpp"
#include "oar/ops/list_control.hpp"
#include "oar/ops/list_recurrent.hpp"
#include "oar/ops/list_sequence.hpp"
#include "oar/ops/list_sequence_shape.hpp"
#include "oar/ops/mul.hpp"

namespace oar {

using AllOps = op_list_concat<op_list<ops::Feed, ops::Fetch, ops::Mul, ops::ConditionalBlock, ops::ConditionalBlockGrad, ops::While, ops::WhileGrad, ops::LrSchedule>, UnaryOps, MathOps, NnOps, TensorOps, OptimOps, AmpOps, ControlOps,
                                SequenceOps, SequenceShapeOps, RecurrentOps, ArrayOps, CollectiveOps>::type;

}  // namespace oar
