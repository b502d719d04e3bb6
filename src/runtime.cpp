// src/runtime.cpp: part of liboar, the compiled mode's implementation (docs/building.md):
// devices (allocators, tensors, scopes, contexts, the thread pool), the executor, the profiler.
// Each -inl.hpp is compiled in exactly one src/*.cpp (the layering test checks it).
#include "oar/config.hpp"

#if OAR_HEADER_ONLY
#error "liboar is built with OAR_LIB defined (CMake's oar target does it)"
#endif

#include "oar/device/allocator-inl.hpp"
#include "oar/device/tensor-inl.hpp"
#include "oar/device/scope-inl.hpp"
#include "oar/device/thread_pool-inl.hpp"
#include "oar/device/device_context-inl.hpp"
#include "oar/device/kernel_context-inl.hpp"
#include "oar/device/conv_algorithm-inl.hpp"
#include "oar/device/cuda-inl.hpp"
#include "oar/device/communicator-inl.hpp"
#include "oar/runtime/executor-inl.hpp"
#include "oar/runtime/profiler-inl.hpp"

