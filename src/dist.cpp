// src/dist.cpp: part of liboar, the compiled mode's implementation (docs/building.md):
// data-parallel training across processes (the MPI communicator, dist::Context). The one unit that includes mpi.h.
// Each -inl.hpp is compiled in exactly one src/*.cpp (the layering test checks it).
#include "oar/config.hpp"

#if OAR_HEADER_ONLY
#error "liboar is built with OAR_LIB defined (CMake's oar target does it)"
#endif

#include "oar/dist/context-inl.hpp"
