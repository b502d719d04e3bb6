// oar/device/conv_algorithm-inl.hpp: the implementation of conv_algorithm.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/device/conv_algorithm.hpp"

#include <cstdlib>
#include <string_view>

namespace oar {

OAR_FUNC std::atomic<int>& detail::conv_algorithm_slot() {
  static std::atomic<int> slot = [] {
    const char* env = std::getenv("OAR_CONV");
    const std::string_view v = env ? env : "";
    return int(v == "im2col"           ? ConvAlgorithm::im2col
               : v == "winograd"       ? ConvAlgorithm::winograd
               : v == "winograd_small" ? ConvAlgorithm::winograd_small
                                       : ConvAlgorithm::automatic);
  }();
  return slot;
}

}  // namespace oar
