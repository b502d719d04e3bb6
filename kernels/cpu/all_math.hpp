// kernels/cpu/all_math.hpp: the CPU kernel headers of the math family (see ops/list_math.hpp).
#pragma once
#include "kernels/cpu/clip_by_norm.hpp"
#include "kernels/cpu/elementwise_binary.hpp"
#include "kernels/cpu/fill_zeros_like.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/mean.hpp"
#include "kernels/cpu/reduce.hpp"
#include "kernels/cpu/scale.hpp"
#include "kernels/cpu/sign.hpp"
#include "kernels/cpu/squared_l2_norm.hpp"
#include "kernels/cpu/sum.hpp"
