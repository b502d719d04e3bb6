// kernels/cpu/all_sequence_shape.hpp: the CPU kernel headers of ops/list_sequence_shape.hpp.
#pragma once
#include "kernels/cpu/sequence_conv.hpp"
#include "kernels/cpu/sequence_pad.hpp"
#include "kernels/cpu/sequence_reshape.hpp"
#include "kernels/cpu/sequence_slice.hpp"
