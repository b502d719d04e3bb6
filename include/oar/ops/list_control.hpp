// oar/ops/list_control.hpp: the control family's part of the op list (joined in ops/op_list.hpp): recurrent and
// its gradient (run by the executor itself) and fused_elementwise, the op the tape's expression templates record.
#pragma once
#include "oar/ops/fused_elementwise.hpp"
#include "oar/ops/op.hpp"
#include "oar/ops/recurrent.hpp"

namespace oar {

using ControlOps = op_list<ops::FusedElementwise, ops::Recurrent, ops::RecurrentGrad>;

}  // namespace oar
