// src/program.cpp: part of liboar, the compiled mode's implementation (docs/building.md):
// the program IR (serialization, printing, DOT), the tape and its replay, autodiff, optimizers as ops.
// Each -inl.hpp is compiled in exactly one src/*.cpp (the layering test checks it).
#include "oar/config.hpp"

#if OAR_HEADER_ONLY
#error "liboar is built with OAR_LIB defined (CMake's oar target does it)"
#endif

#include "oar/ir/program-inl.hpp"
#include "oar/ir/serialize-inl.hpp"
#include "oar/ir/print-inl.hpp"
#include "oar/ir/dot-inl.hpp"
#include "oar/tape/tape-inl.hpp"
#include "oar/tape/replay-inl.hpp"
#include "oar/autodiff/backward-inl.hpp"
#include "oar/optim/optimizer-inl.hpp"
#include "oar/optim/clip-inl.hpp"
#include "oar/optim/mixed_precision-inl.hpp"
#include "oar/optim/collective-inl.hpp"
#include "oar/optim/regularizer-inl.hpp"

