// kernels/cpu/all_tensor.hpp: the CPU kernel headers of the tensor family (see ops/list_tensor.hpp).
#pragma once
#include "kernels/cpu/arg_max.hpp"
#include "kernels/cpu/assign.hpp"
#include "kernels/cpu/concat.hpp"
#include "kernels/cpu/fill_constant.hpp"
#include "kernels/cpu/gather.hpp"
#include "kernels/cpu/lookup_table.hpp"
#include "kernels/cpu/one_hot.hpp"
#include "kernels/cpu/random.hpp"
#include "kernels/cpu/runtime_shape.hpp"
#include "kernels/cpu/shape_ops.hpp"
#include "kernels/cpu/slice.hpp"
#include "kernels/cpu/transpose.hpp"
