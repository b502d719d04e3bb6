// oar/runtime/device_context.hpp: device contexts kernels run on: CpuContext (the thread pool and a seed
// source); CudaContext is declared here and defined in kernels/cuda/ when CUDA is built.
#pragma once
#include <atomic>
#include <cstdint>
#include <random>

#include "oar/core/place.hpp"

namespace oar {

/// Per-executor CPU state. Intra-op parallelism goes through oar::parallel_for (runtime/thread_pool.hpp).
class CpuContext {
 public:
  explicit CpuContext(uint64_t seed = 0) : seed_(seed ? seed : std::random_device{}()) {}
  Place place() const { return cpu_place(); }
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

class CudaContext;  // kernels/cuda/context.cu, only with OAR_WITH_CUDA

}  // namespace oar
