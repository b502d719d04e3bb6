# OarDeps.cmake: oar's dependencies, shared by the build and the installed package config.
find_package(Threads REQUIRED)
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(fmt REQUIRED)
find_package(Protobuf REQUIRED)
find_package(ZLIB REQUIRED)

# OpenBLAS (Debian libopenblas-dev): the GEMM path when present.
find_path(OAR_CBLAS_INCLUDE cblas.h PATH_SUFFIXES openblas)
find_library(OAR_BLAS_LIBRARY NAMES openblas)
set(OAR_BLAS_FOUND OFF)
if(OAR_CBLAS_INCLUDE AND OAR_BLAS_LIBRARY)
  set(OAR_BLAS_FOUND ON)
endif()

# Open MPI (Debian libopenmpi-dev): data-parallel training across processes (dist/, docs/distributed.md).
# Its C API only: MPI_CXX_SKIP_MPICXX keeps the deprecated C++ bindings out.
set(MPI_CXX_SKIP_MPICXX ON)
find_package(MPI QUIET COMPONENTS CXX)
