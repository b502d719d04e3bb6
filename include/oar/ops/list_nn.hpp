// oar/ops/list_nn.hpp: the nn family's part of the op list (joined in ops/op_list.hpp).
#pragma once
#include "oar/ops/op.hpp"

namespace oar {

using NnOps = op_list<void>;

}  // namespace oar
