// kernels/cpu/all_optim.hpp: the CPU kernel headers of the optim family (see ops/list_optim.hpp).
#pragma once
#include "kernels/cpu/amp.hpp"
#include "kernels/cpu/optimizers.hpp"
