// oar/device/allocator-inl.hpp: the implementation of allocator.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/device/allocator.hpp"

#include <algorithm>
#include <cstdlib>

namespace oar {

OAR_FUNC void Allocator::count_allocation(size_t bytes) {
  int64_t now = stats_.current += int64_t(bytes);
  stats_.allocations++;
  int64_t p = stats_.peak.load();
  while (now > p && !stats_.peak.compare_exchange_weak(p, now)) {}
}

OAR_FUNC void* CpuAllocator::allocate(size_t bytes) {
  void* p = std::aligned_alloc(64, (std::max<size_t>(bytes, 1) + 63) / 64 * 64);
  if (!p) throw Error(fmt::format("out of memory allocating {} bytes on the CPU", bytes));
  count_allocation(bytes);
  return p;
}

OAR_FUNC void CpuAllocator::deallocate(void* p, size_t bytes) noexcept {
  std::free(p);
  count_release(bytes);
}

OAR_FUNC Allocator& allocator(Place place) {
  if (place.is_cpu()) {
    static CpuAllocator cpu_alloc;
    return cpu_alloc;
  }
  return cuda_allocator(place.device);
}

// With CUDA, kernels/cuda/allocators.cpp defines it.
#if !OAR_WITH_CUDA
OAR_FUNC Allocator& cuda_allocator(int device) {
  throw Error(fmt::format("no CUDA device {}: oar was built without CUDA (configure with the CUDA toolkit present)", device));
}
OAR_FUNC Allocator* cuda_pinned_allocator() { return nullptr; }
#endif

OAR_FUNC Allocator& pinned_allocator() {
  Allocator* a = cuda_pinned_allocator();
  return a ? *a : allocator(cpu());
}

}  // namespace oar
