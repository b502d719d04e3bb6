// kernels/cpu/all_nn.hpp: the CPU kernel headers of the nn family (see ops/list_nn.hpp).
#pragma once
