// oar/device/conv_algorithm.hpp: the process-wide setting of how the CPU convolutions choose their kernel
// (kernels/cpu/conv_choice.hpp).
#pragma once
#include <atomic>

#include "oar/config.hpp"

namespace oar {

/// Which kernel conv2d, conv2d_fusion and conv2d_grad use on the CPU.
/// `automatic` (the default) times the kernels that apply the first time each shape runs (im2col + GEMM, and
/// for stride-1 3x3 or 5x5 windows with at least 8 input and output channels Winograd tiles of both sizes) and
/// keeps the fastest for the process, separately for the forward and the backward pass (as cuDNN's find does;
/// the first call of a shape runs each candidate twice). `im2col` never uses tiles; `winograd` (8 x 8 tiles)
/// and `winograd_small` (6 x 6 tiles) use them wherever they apply, whatever the channel counts.
/// Winograd rounds differently: f32 outputs differ from im2col's by about 1e-6 of the output's magnitude, so
/// under `automatic` two processes may round a shape differently (docs/runtime.md); pin a setting where that
/// matters. The environment variable OAR_CONV=im2col|winograd|winograd_small|auto sets the starting value.
enum class ConvAlgorithm { automatic, im2col, winograd, winograd_small };

namespace detail {
/// The process-wide setting (an int: ConvAlgorithm), first read from OAR_CONV.
std::atomic<int>& conv_algorithm_slot();
}  // namespace detail

/// Sets the convolution algorithm for every later run (any thread). Example: oar::set_conv_algorithm(oar::ConvAlgorithm::im2col);
inline void set_conv_algorithm(ConvAlgorithm a) { detail::conv_algorithm_slot().store(int(a), std::memory_order_relaxed); }
inline ConvAlgorithm conv_algorithm() { return ConvAlgorithm(detail::conv_algorithm_slot().load(std::memory_order_relaxed)); }

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/device/conv_algorithm-inl.hpp"
#endif
