// oar/device/device_context-inl.hpp: the implementation of device_context.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/device/device_context.hpp"

#include <random>

namespace oar {

OAR_FUNC DeviceContext::DeviceContext(uint64_t seed) : seed_(seed ? seed : std::random_device{}()) {}

}  // namespace oar
