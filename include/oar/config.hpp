// oar/config.hpp: build switches, version and the host/device marker shared by every header.
#pragma once

#define OAR_VERSION_MAJOR 0
#define OAR_VERSION_MINOR 1
#define OAR_VERSION_PATCH 0

#if defined(__CUDACC__)
#define OAR_HD __host__ __device__
#else
#define OAR_HD
#endif

#ifndef OAR_WITH_CUDA
#define OAR_WITH_CUDA 0
#endif

#if __cplusplus < 202002L && !defined(__CUDACC__)
#error "oar needs C++20"
#endif
