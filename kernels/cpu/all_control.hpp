// kernels/cpu/all_control.hpp: the CPU kernel headers of the control family (see ops/list_control.hpp).
#pragma once
#include "kernels/cpu/fused_elementwise.hpp"
