// src/kernels.cpp: part of liboar, the compiled mode's implementation (docs/building.md):
// the kernel registry and every CPU kernel, in one unit: each unit of a split would parse Eigen and the
// GEMM path again, costing more CPU than building the parts side by side saves on two cores.
// Each -inl.hpp is compiled in exactly one src/*.cpp (the layering test checks it).
#include "oar/config.hpp"

#if OAR_HEADER_ONLY
#error "liboar is built with OAR_LIB defined (CMake's oar target does it)"
#endif

#include "kernels/cpu/all.hpp"
#if OAR_WITH_CUDA
#include "kernels/cuda/all.hpp"  // the host side of the CUDA kernels; their device side is in oar_cuda
#endif
#include "oar/runtime/kernel_registry-inl.hpp"

