// oar/device/device_context.hpp: what a kernel gets from the device it runs on. DeviceContext is the one
// interface (its place and the executor's seed source); CpuContext adds nothing but a name for the CPU (the
// thread pool is global, device/thread_pool.hpp); CudaContext (device/cuda.hpp) adds a stream and the
// cuBLAS and cuDNN handles.
#pragma once
#include <atomic>
#include <cstdint>

#include "oar/config.hpp"
#include "oar/core/place.hpp"

namespace oar {

class DeviceContext {
 public:
  /// `seed` 0 draws one from std::random_device.
  explicit DeviceContext(uint64_t seed = 0);
  virtual ~DeviceContext() = default;
  DeviceContext(const DeviceContext&) = delete;
  DeviceContext& operator=(const DeviceContext&) = delete;

  virtual Place place() const = 0;
  /// Waits until every kernel launched through this context has finished (a no-op on the CPU).
  virtual void synchronize() const {}

  /// A seed for an op whose `seed` attribute is 0: deterministic for a fixed executor seed.
  uint64_t next_seed() const { return seed_ + 0x9E3779B97F4A7C15ull * ++counter_; }
  void set_seed(uint64_t s) {
    seed_ = s;
    counter_ = 0;
  }
  /// How many seeds were handed out: with the seed, the whole random state (checkpoints save it).
  uint64_t counter() const { return counter_; }
  uint64_t seed() const { return seed_; }
  void set_counter(uint64_t c) { counter_ = c; }

 private:
  uint64_t seed_;
  mutable std::atomic<uint64_t> counter_{0};
};

/// The CPU: kernels run on the calling thread and split work with oar::parallel_for.
class CpuContext final : public DeviceContext {
 public:
  explicit CpuContext(uint64_t seed = 0) : DeviceContext(seed) {}
  Place place() const override { return cpu(); }
};

class CudaContext;  // device/cuda.hpp; defined in kernels/cuda/context.cpp when CUDA is built

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/device/device_context-inl.hpp"
#endif
