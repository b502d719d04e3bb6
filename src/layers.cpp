// src/layers.cpp: part of liboar, the compiled mode's implementation (docs/building.md):
// the layer functions (their replay and the ops they emit).
// Each -inl.hpp is compiled in exactly one src/*.cpp (the layering test checks it).
#include "oar/config.hpp"

#if OAR_HEADER_ONLY
#error "liboar is built with OAR_LIB defined (CMake's oar target does it)"
#endif

#include "oar/layers/op_layer-inl.hpp"
#include "oar/layers/nn-inl.hpp"
#include "oar/layers/attention-inl.hpp"
#include "oar/layers/loss-inl.hpp"
#include "oar/layers/metrics-inl.hpp"
#include "oar/layers/tensor-inl.hpp"
#include "oar/layers/control_flow-inl.hpp"
#include "oar/layers/if_else-inl.hpp"
#include "oar/layers/sequence-inl.hpp"
#include "oar/layers/sequence_shape-inl.hpp"
#include "oar/layers/recurrent-inl.hpp"
#include "oar/layers/recurrent_group-inl.hpp"
#include "oar/layers/rnn_builder-inl.hpp"
#include "oar/layers/static_rnn-inl.hpp"
#include "oar/layers/compare-inl.hpp"
#include "oar/layers/array-inl.hpp"
#include "oar/layers/dynamic_rnn-inl.hpp"
