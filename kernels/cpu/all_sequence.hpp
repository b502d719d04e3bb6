// kernels/cpu/all_sequence.hpp: the CPU kernel headers of ops/list_sequence.hpp.
#pragma once
#include "kernels/cpu/lod_reset.hpp"
#include "kernels/cpu/sequence_concat.hpp"
#include "kernels/cpu/sequence_expand.hpp"
#include "kernels/cpu/sequence_mask.hpp"
#include "kernels/cpu/sequence_pool.hpp"
#include "kernels/cpu/sequence_softmax.hpp"
#include "kernels/cpu/split_merge_lod_tensor.hpp"
