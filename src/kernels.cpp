// src/kernels.cpp: part of liboar, the compiled mode's implementation (docs/building.md):
// the kernel registry and every CPU kernel.
// Each -inl.hpp is compiled in exactly one src/*.cpp (the layering test checks it).
#include "oar/config.hpp"

#if OAR_HEADER_ONLY
#error "liboar is built with OAR_LIB defined (CMake's oar target does it)"
#endif

#include "oar/runtime/kernel_registry-inl.hpp"

