// kernels/cpu/all_recurrent.hpp: the CPU kernel headers of ops/list_recurrent.hpp.
#pragma once
#include "kernels/cpu/gru.hpp"
#include "kernels/cpu/gru_unit.hpp"
#include "kernels/cpu/lstm.hpp"
#include "kernels/cpu/lstm_unit.hpp"
