// oar/ops/list_optim.hpp: the optim family's part of the op list (joined in ops/op_list.hpp).
#pragma once
#include "oar/ops/op.hpp"

namespace oar {

using OptimOps = op_list<void>;

}  // namespace oar
