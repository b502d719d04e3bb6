// src/api.cpp: part of liboar, the compiled mode's implementation (docs/building.md):
// Model, Evaluator, GradientMachine, Optimizer, metrics, inference fusion.
// Each -inl.hpp is compiled in exactly one src/*.cpp (the layering test checks it).
#include "oar/config.hpp"

#if OAR_HEADER_ONLY
#error "liboar is built with OAR_LIB defined (CMake's oar target does it)"
#endif

#include "oar/api/model-inl.hpp"
#include "oar/api/evaluator-inl.hpp"
#include "oar/api/gradient_machine-inl.hpp"
#include "oar/api/optimizer-inl.hpp"
#include "oar/api/metrics-inl.hpp"
#include "oar/api/fuse-inl.hpp"

