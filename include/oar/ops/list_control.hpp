// oar/ops/list_control.hpp: the control family's part of the op list (joined in ops/op_list.hpp).
#pragma once
#include "oar/ops/op.hpp"

namespace oar {

using ControlOps = op_list<void>;

}  // namespace oar
