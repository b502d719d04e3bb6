// tests/kernels.cpp: compiles oar's kernels once for all test executables (OAR_SEPARATE_KERNELS is defined
// for every test source; this one also defines OAR_KERNELS_IMPLEMENTATION).
#define OAR_KERNELS_IMPLEMENTATION
#include <oar/oar.hpp>
