// kernels/cpu/place_io.hpp: kernels/common/place_io.hpp's helpers as cpu_kernels::place_io, the name the
// `any_place` kernels of this folder call them by.
#pragma once
#include "kernels/common/place_io.hpp"

namespace oar::cpu_kernels {
namespace place_io = kernels::place_io;
}  // namespace oar::cpu_kernels
