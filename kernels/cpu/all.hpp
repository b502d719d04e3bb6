// kernels/cpu/all.hpp: every CPU kernel header; the kernel registry includes this one file. Each family
// keeps its includes in kernels/cpu/all_<family>.hpp.
#pragma once
#include "kernels/cpu/all_array.hpp"
#include "kernels/cpu/all_collective.hpp"
#include "kernels/cpu/all_control.hpp"
#include "kernels/cpu/all_math.hpp"
#include "kernels/cpu/all_nn.hpp"
#include "kernels/cpu/all_optim.hpp"
#include "kernels/cpu/all_recurrent.hpp"
#include "kernels/cpu/all_sequence.hpp"
#include "kernels/cpu/all_sequence_shape.hpp"
#include "kernels/cpu/all_tensor.hpp"
#include "kernels/cpu/elementwise.hpp"
#include "kernels/cpu/lr_schedule.hpp"
#include "kernels/cpu/mul.hpp"
