// oar/device/allocator.hpp: where tensor storage comes from. One Allocator per place behind one interface:
// the CPU's hands out 64-byte aligned blocks; CUDA's (kernels/cuda/allocators.cpp, built with the toolkit) is
// a caching, stream-ordered pool per device. Each keeps its own MemoryStats.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "oar/config.hpp"
#include "oar/core/error.hpp"
#include "oar/core/place.hpp"

namespace oar {

/// Bytes currently held by tensors on one place, the peak since the last reset, and how many blocks were
/// ever allocated (a steady-state run allocates none).
struct MemoryStats {
  std::atomic<int64_t> current{0};
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> allocations{0};
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  /// `bytes` of storage on this allocator's place; an oar::Error when the device is out of memory.
  virtual void* allocate(size_t bytes) = 0;
  /// Returns a block from allocate(bytes). Never throws.
  virtual void deallocate(void* p, size_t bytes) noexcept = 0;
  virtual Place place() const = 0;
  MemoryStats& stats() { return stats_; }

 protected:
  /// Counts a new block of `bytes` (current, peak, allocations).
  void count_allocation(size_t bytes);
  void count_release(size_t bytes) { stats_.current -= int64_t(bytes); }

 private:
  MemoryStats stats_;
};

/// The CPU's: 64-byte aligned blocks (AVX-512 loads never split a cache line at a row start).
class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override;
  void deallocate(void* p, size_t bytes) noexcept override;
  Place place() const override { return cpu(); }
};

/// The CUDA device's allocator (kernels/cuda/allocators.cpp); an oar::Error when CUDA is not built or there is
/// no such device.
Allocator& cuda_allocator(int device);

/// Page-locked host memory (place cpu) where a CUDA device is present: a copy from it to a GPU runs as a DMA
/// transfer, not through the driver's staging buffers on the CPU. Blocks are kept for reuse by size class
/// (detail::pinned_size_class). Without CUDA or a device: the CPU's allocator.
Allocator& pinned_allocator();

namespace detail {
/// The size of the page-locked block that serves a request of `bytes`: at least 4 KiB, then eight classes per
/// power of two (at most 1/8 more than asked). Blocks are never given back to the driver, so batches of ragged
/// sizes (sequences, the last batch of an epoch) must meet a few classes, not a new size each time.
constexpr size_t pinned_size_class(size_t bytes) {
  if (bytes <= 4096) return 4096;
  if (bytes > (size_t(1) << 62)) return bytes;  // no such block can be pinned; the classes below would overflow
  size_t octave = 4096;  // the largest power of two below bytes
  while (octave * 2 < bytes) octave *= 2;
  const size_t step = octave / 8;
  return (bytes + step - 1) / step * step;
}
}  // namespace detail
/// The CUDA backend's page-locked allocator (kernels/cuda/allocators.cpp); null without CUDA or a device.
Allocator* cuda_pinned_allocator();

/// The allocator of `place`.
Allocator& allocator(Place place);

/// Memory held by tensors on `place` (the CPU by default).
inline MemoryStats& memory_stats(Place place = cpu()) { return allocator(place).stats(); }
inline void reset_peak_memory(Place place = cpu()) { memory_stats(place).peak = memory_stats(place).current.load(); }

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/device/allocator-inl.hpp"
#endif
