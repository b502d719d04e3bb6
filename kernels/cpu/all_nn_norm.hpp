// kernels/cpu/all_nn_norm.hpp: the CPU kernel headers of the nn family's normalization / loss / softmax ops
// (see ops/list_nn_norm.hpp).
#pragma once
#include "kernels/cpu/accuracy.hpp"
#include "kernels/cpu/batch_norm.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/layer_norm.hpp"
#include "kernels/cpu/sigmoid_cross_entropy_with_logits.hpp"
#include "kernels/cpu/softmax.hpp"
#include "kernels/cpu/softmax_with_cross_entropy.hpp"
