// kernels/cpu/all_nn.hpp: the CPU kernel headers of the nn family (see ops/list_nn.hpp); the normalization
// ops keep theirs in kernels/cpu/all_nn_norm.hpp.
#pragma once
#include "kernels/cpu/all_nn_norm.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/conv2d.hpp"
#include "kernels/cpu/conv2d_transpose.hpp"
#include "kernels/cpu/kv_cache.hpp"
#include "kernels/cpu/pool2d.hpp"
#include "kernels/cpu/position.hpp"
