// src/ops.cpp: part of liboar, the compiled mode's implementation (docs/building.md):
// the op registry (every op's schema, shape inference and grad maker), initializers, schema dumps.
// Each -inl.hpp is compiled in exactly one src/*.cpp (the layering test checks it).
#include "oar/config.hpp"

#if OAR_HEADER_ONLY
#error "liboar is built with OAR_LIB defined (CMake's oar target does it)"
#endif

#include "oar/ops/registry-inl.hpp"
#include "oar/ops/schema_dump-inl.hpp"
#include "oar/ops/initializers-inl.hpp"
#include "oar/ops/param_attr-inl.hpp"

