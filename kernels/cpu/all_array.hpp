// kernels/cpu/all_array.hpp: the CPU kernel headers of ops/list_array.hpp.
#pragma once
#include "kernels/cpu/compare.hpp"
#include "kernels/cpu/lod_rank_table.hpp"
#include "kernels/cpu/tensor_array.hpp"
