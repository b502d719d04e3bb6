// oar/ops/list_math.hpp: the math family's part of the op list (joined in ops/op_list.hpp).
#pragma once
#include "oar/ops/op.hpp"

namespace oar {

using MathOps = op_list<void>;

}  // namespace oar
