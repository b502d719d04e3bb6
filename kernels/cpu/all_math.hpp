// kernels/cpu/all_math.hpp: the CPU kernel headers of the math family (see ops/list_math.hpp).
#pragma once
