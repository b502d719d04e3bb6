// oar/config.hpp: build switches, version and the host/device marker shared by every header.
#pragma once

// Semantic versioning (docs/building.md); CMakeLists.txt's project(VERSION) is the source, and configuring
// fails if these differ from it. While 0.x, a MINOR bump may break code (with a CHANGELOG.md entry).
#define OAR_VERSION_MAJOR 0
#define OAR_VERSION_MINOR 1
#define OAR_VERSION_PATCH 0
/// One number to compare: 0.1.0 is 100, 1.2.3 is 10203.
#define OAR_VERSION (OAR_VERSION_MAJOR * 10000 + OAR_VERSION_MINOR * 100 + OAR_VERSION_PATCH)

#if defined(__CUDACC__)
#define OAR_HD __host__ __device__
#else
#define OAR_HD
#endif

// Two ways to build against oar (docs/building.md):
// - header-only, the default: the including translation unit compiles oar's implementation as well, so only
//   include paths and system libraries are needed (CMake: oar::header_only).
// - compiled: with OAR_LIB defined (CMake's oar::oar defines it and links liboar), headers declare and the
//   implementation (kernels, registries, executor, serialization, io) comes from liboar, compiled once.
// An implementation lives in `<name>-inl.hpp` beside its header, each definition marked OAR_FUNC; the header
// includes it only when header-only, and src/*.cpp include each one exactly once to build liboar.
#if defined(OAR_LIB)
#define OAR_HEADER_ONLY 0
#define OAR_FUNC
#else
#define OAR_HEADER_ONLY 1
#define OAR_FUNC inline
#endif

#ifndef OAR_WITH_CUDA
#define OAR_WITH_CUDA 0
#endif

#if __cplusplus < 202002L && !defined(__CUDACC__)
#error "oar needs C++20"
#endif
