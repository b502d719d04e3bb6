// kernels/common/scratch.hpp: per-thread host buffers that outlive a kernel call, so that a steady run allocates
// nothing. Host memory only: the plans of both places and the CPU kernels take their scratch from here.
#pragma once
#include <cstddef>
#include <vector>

namespace oar::kernels {

/// A per-thread buffer of at least `n` elements that lives as long as the thread (pool workers are
/// long-lived, so repeated calls allocate nothing). `Slot` tells buffers used at the same time apart.
/// ensures: the contents are unspecified.
template <class T, int Slot>
inline T* thread_scratch(size_t n) {
  thread_local std::vector<T> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

}  // namespace oar::kernels
