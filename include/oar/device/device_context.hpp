// oar/device/device_context.hpp: what a kernel and an executor run get from the device. DeviceContext is the
// one interface (its place, the executor's seed source, and a run's ordering, feeds, fetches and graphs);
// CpuContext adds nothing but a name for the CPU (the thread pool is global, device/thread_pool.hpp);
// CudaContext (device/cuda.hpp) adds a stream and the cuBLAS and cuDNN handles.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "oar/config.hpp"
#include "oar/core/place.hpp"

struct CUevent_st;  // cudaEvent_t

namespace oar {

class LoDTensor;

/// A point in the work queued on a GPU: an event recorded on a stream (DeviceContext::record_fence). done() asks
/// whether the device has passed it; wait() blocks the calling thread until it has (sleeping under
/// cudaDeviceScheduleBlockingSync, spinning otherwise, as the device's other waits do) and is an oar::Error
/// when work before it failed. An empty fence (the CPU's work, done when queued) is always done. Copies share
/// the point.
class Fence {
 public:
  Fence() = default;
  bool done() const;
  void wait() const;

 private:
  friend class CudaContext;
  std::shared_ptr<CUevent_st> event_;  // back to its device's spares when the last copy goes
};

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

  // What an executor run needs of its device beyond kernels. The CPU's answers are the defaults: nothing to
  // order, copies made at once, no graphs. CudaContext queues on its stream.

  /// Before a run: orders it after the device's last run; end_run(the token) makes it the one the next follows.
  virtual int begin_run() { return 0; }
  virtual void end_run(int /*token*/) noexcept {}
  /// (put_feed's and take_fetch's defaults are in cuda-inl.hpp, beside CudaContext's: both need tensor.hpp,
  /// whose implementation needs cuda.hpp.)
  /// Puts the fed tensor `src` (on any place) into `dst`, this place's storage of the variable. With `queue` the
  /// host does not wait for the run, and a device may queue the copy: true when it queued one from page-locked
  /// memory (the run's fence then guards `src`).
  virtual bool put_feed(LoDTensor& dst, const LoDTensor& src, bool queue);
  /// `out` = the run's value `t` as the host reads it. With `queue` a device may queue the copy into page-locked
  /// memory (true then: it is there once the run's fence is done).
  virtual bool take_fetch(const LoDTensor& t, LoDTensor& out, bool queue);
  /// A fence after the work queued so far: empty on the CPU, whose work is done when it returns.
  virtual Fence record_fence() const { return Fence(); }
  /// CUDA graphs (CudaContext has the rules): a capture of what this thread queues, false when none can start.
  virtual bool begin_capture() { return false; }
  virtual void* end_capture(bool* replayable, std::vector<void*>* /*lost*/ = nullptr) {
    if (replayable) *replayable = false;
    return nullptr;
  }
  virtual std::vector<void*> abandon_capture() { return {}; }
  virtual void launch(void* /*graph*/) const {}
  /// A graph from end_capture, owned: destroyed with the last copy.
  virtual std::shared_ptr<void> keep_graph(void* /*graph*/) const { return nullptr; }

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
