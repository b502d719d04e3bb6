// oar/device/conv_algorithm.hpp: the process-wide choice between im2col + GEMM and Winograd tiles for the CPU
// convolutions (kernels/cpu/conv2d.hpp, kernels/cpu/winograd.hpp).
#pragma once
#include <atomic>

#include "oar/config.hpp"

namespace oar {

/// Which algorithm conv2d, conv2d_fusion and conv2d_grad use on the CPU where both apply.
/// `automatic` (the default) picks Winograd tiles for the shapes they are faster on: stride 1, no dilation,
/// one group, a 3x3 or 5x5 window with padding below its size, at least 8 input and 8 output channels and
/// an output of at least 4 x 4. `im2col` never uses them; `winograd` uses them wherever they apply, whatever
/// the channel counts. Winograd rounds differently: f32 outputs differ from im2col's by about 1e-6 of the
/// output's magnitude (docs/runtime.md). The environment variable OAR_CONV=im2col|winograd|auto sets the
/// starting value.
enum class ConvAlgorithm { automatic, im2col, winograd };

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
