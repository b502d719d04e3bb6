// kernels/cpu/all_collective.hpp: the CPU kernel headers of the collective family (see ops/list_collective.hpp).
#pragma once
#include "kernels/cpu/collective.hpp"
