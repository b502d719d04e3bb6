// oar/ops/list_collective.hpp: the collective family's part of the op list (joined in ops/op_list.hpp).
#pragma once
#include "oar/ops/collective.hpp"

namespace oar {

using CollectiveOps = op_list<ops::CCommInit, ops::CBroadcast, ops::CAllreduceSum, ops::CReduceSum, ops::CSyncCommStream>;

}  // namespace oar
