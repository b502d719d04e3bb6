// oar/ops/list_tensor.hpp: the tensor family's part of the op list (joined in ops/op_list.hpp).
#pragma once
#include "oar/ops/op.hpp"

namespace oar {

using TensorOps = op_list<void>;

}  // namespace oar
