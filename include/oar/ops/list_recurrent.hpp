// oar/ops/list_recurrent.hpp: the op list of the recurrent cells over LoD sequences: lstm, gru, lstm_unit, gru_unit (joined in ops/op_list.hpp).
#pragma once
#include "oar/ops/gru.hpp"
#include "oar/ops/gru_unit.hpp"
#include "oar/ops/lstm.hpp"
#include "oar/ops/lstm_unit.hpp"
#include "oar/ops/op.hpp"

namespace oar {

using RecurrentOps = op_list<ops::Lstm, ops::Gru, ops::LstmUnit, ops::GruUnit>;

}  // namespace oar
