// oar/device/conv_algorithm.hpp: the process-wide choice between im2col + GEMM and Winograd tiles for the CPU
// convolutions (kernels/cpu/conv2d.hpp, kernels/cpu/winograd.hpp).
#pragma once
#include <atomic>
#include <cstdlib>
#include <string_view>

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
inline std::atomic<int>& conv_algorithm_slot() {
  static std::atomic<int> slot = [] {
    const char* env = std::getenv("OAR_CONV");
    const std::string_view v = env ? env : "";
    return int(v == "im2col" ? ConvAlgorithm::im2col : v == "winograd" ? ConvAlgorithm::winograd : ConvAlgorithm::automatic);
  }();
  return slot;
}
}  // namespace detail

/// Sets the convolution algorithm for every later run (any thread). Example: oar::set_conv_algorithm(oar::ConvAlgorithm::im2col);
inline void set_conv_algorithm(ConvAlgorithm a) { detail::conv_algorithm_slot().store(int(a), std::memory_order_relaxed); }
inline ConvAlgorithm conv_algorithm() { return ConvAlgorithm(detail::conv_algorithm_slot().load(std::memory_order_relaxed)); }

}  // namespace oar
