// kernels/cpu/all_tensor.hpp: the CPU kernel headers of the tensor family (see ops/list_tensor.hpp).
#pragma once
