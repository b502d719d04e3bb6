// src/io.cpp: part of liboar, the compiled mode's implementation (docs/building.md):
// tensor, checkpoint and inference-model files, datasets and readers.
// Each -inl.hpp is compiled in exactly one src/*.cpp (the layering test checks it).
#include "oar/config.hpp"

#if OAR_HEADER_ONLY
#error "liboar is built with OAR_LIB defined (CMake's oar target does it)"
#endif

#include "oar/io/tensor_file-inl.hpp"
#include "oar/io/checkpoint-inl.hpp"
#include "oar/io/inference_model-inl.hpp"
#include "oar/io/idx-inl.hpp"
#include "oar/io/fashion_mnist-inl.hpp"
#include "oar/io/dataset-inl.hpp"

