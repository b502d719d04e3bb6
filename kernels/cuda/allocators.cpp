// kernels/cuda/allocators.cpp: each device's caching allocator (CUDA's stream-ordered pool) and the page-locked
// host allocator, with what a graph capture means for them: blocks allocated in a capture belong to its graph,
// older blocks freed in it are freed after its launch, and a capture given up leaves blocks without memory.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <vector>

#include "kernels/cuda/detail/device_state.hpp"
#include "oar/device/allocator.hpp"
#include "oar/device/cuda.hpp"

namespace oar::cuda_state {

// Blocks allocated inside a capture that was given up: addresses of a graph that never ran, with no memory
// behind them. Their tensors let go of them (CudaContext::abandon_capture); freeing them is then a no-op.
std::atomic<bool> g_any_unbacked{false};
std::mutex& unbacked_mutex() {
  static std::mutex& m = *new std::mutex;
  return m;
}
std::set<void*>& unbacked() {
  static std::set<void*>& s = *new std::set<void*>;
  return s;
}
bool forget_unbacked(void* p) {
  if (!g_any_unbacked.load(std::memory_order_relaxed)) return false;
  std::lock_guard lock(unbacked_mutex());
  if (!unbacked().erase(p)) return false;
  if (unbacked().empty()) g_any_unbacked = false;
  return true;
}

void keep_unbacked(const std::vector<void*>& captured, std::vector<void*>* lost) {
  if (captured.empty()) return;
  {
    std::lock_guard lock(unbacked_mutex());
    unbacked().insert(captured.begin(), captured.end());
    g_any_unbacked = true;
  }
  if (lost) lost->insert(lost->end(), captured.begin(), captured.end());
}

void free_block(void* p, int d, cudaStream_t stream, int stream_device) {
  const detail::GateVisit visit(d == stream_device ? nullptr : visit_gate(d));
  DeviceGuard g(d);
  if (cudaFreeAsync(p, d == stream_device ? stream : nullptr) != cudaSuccess) cudaGetLastError();  // a free's error is no kernel's
}

}  // namespace oar::cuda_state

namespace oar {

using namespace cuda_state;

namespace {

/// A device's allocator: CUDA's stream-ordered pool (cudaMallocAsync), told to keep freed memory instead of
/// returning it to the driver, so that a repeated run with the same shapes reuses blocks without a
/// device-wide synchronisation. Allocations are ordered on the legacy default stream, which every oar stream
/// synchronises with (oar creates its streams blocking).
class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int device) : device_(device) {
    DeviceGuard g(device);
    cuda_check(cudaDeviceGetDefaultMemPool(&pool_, device), "cudaDeviceGetDefaultMemPool");
    uint64_t keep = UINT64_MAX;
    cuda_check(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
  }
  void* allocate(size_t bytes) override {
    DeviceGuard g(device_);
    const detail::GateVisit visit(visit_gate(device_));
    void* p = nullptr;
    cudaError_t e = cudaMallocFromPoolAsync(&p, std::max<size_t>(bytes, 1), pool_, tl_capture);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      throw Error(fmt::format("out of memory on cuda:{}: asked for {} bytes, {} of {} bytes free", device_, bytes, free, total));
    }
    cuda_check(e, "cudaMallocFromPoolAsync");
    if (tl_capture) tl_captured->push_back(p);
    count_allocation(bytes);
    return p;
  }
  void deallocate(void* p, size_t bytes) noexcept override {
    count_release(bytes);
    if (forget_unbacked(p)) return;
    DeviceGuard g(device_);
    if (tl_capture) {
      auto it = std::find(tl_captured->begin(), tl_captured->end(), p);
      if (it != tl_captured->end()) {  // allocated in the graph: freed in it
        tl_captured->erase(it);
        if (cudaFreeAsync(p, tl_capture) != cudaSuccess) cudaGetLastError();
      } else {  // older than the capture, and the captured kernels may still use it: freed once the graph is gone
        tl_capture_unsafe = true;
        tl_deferred->emplace_back(p, device_);
      }
    } else {
      const detail::GateVisit visit(visit_gate(device_));
      if (cudaFreeAsync(p, nullptr) != cudaSuccess) cudaGetLastError();  // a failed free must not show up as the next kernel's launch error
    }
  }
  Place place() const override { return cuda(device_); }

 private:
  int device_;
  cudaMemPool_t pool_ = nullptr;
};

/// Page-locked host blocks from cudaHostAlloc (portable: every device may DMA from them), kept by size class
/// (detail::pinned_size_class) once freed: pinning is a system call costing far more than a batch's copy, and a
/// training loop asks for the same few sizes every step. A block is reused only after its tensor is gone and
/// the asynchronous copies queued from or into it (in_use: an executor's feeds and fetches) have run: a freed
/// block with copies pending waits in `waiting_` until their events have completed.
class PinnedAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    bytes = detail::pinned_size_class(bytes);
    {
      std::lock_guard lock(mu_);
      reap();
      if (auto it = free_.find(bytes); it != free_.end()) {
        void* p = it->second;
        free_.erase(it);
        stats().current += int64_t(bytes);
        stats().peak = std::max(stats().peak.load(), stats().current.load());
        return p;
      }
    }
    void* p = nullptr;
    if (cudaError_t e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable); e != cudaSuccess) {
      cudaGetLastError();
      throw Error(fmt::format("cannot pin {} bytes of host memory: {}", bytes, cudaGetErrorString(e)));
    }
    count_allocation(bytes);
    return p;
  }
  void deallocate(void* p, size_t bytes) noexcept override {
    bytes = detail::pinned_size_class(bytes);
    std::lock_guard lock(mu_);
    count_release(bytes);
    const auto it = busy_.find(p);
    try {
      if (it != busy_.end()) {
        waiting_.reserve(waiting_.size() + 1);  // may throw before anything moved; the moves below cannot
        waiting_.push_back({p, bytes, std::move(it->second)});
        busy_.erase(it);
      } else {
        free_.emplace(bytes, p);
      }
    } catch (const std::bad_alloc&) {
      // No host memory to keep the block for reuse: once its copies have run it goes back to the driver.
      if (it != busy_.end()) {
        for (const Event& e : it->second) {
          cudaEventSynchronize(e.e);
          cudaEventDestroy(e.e);
        }
        busy_.erase(it);
      }
      cudaFreeHost(p);
      cudaGetLastError();
    }
  }
  Place place() const override { return cpu(); }

  /// Block `p` is read by work queued on `stream` of `device` so far (an asynchronous copy): recorded as an
  /// event that must complete before the block is given out again. `device` must be the current device.
  void in_use(const void* p, cudaStream_t stream, int device) {
    std::lock_guard lock(mu_);
    std::vector<Event>& events = busy_[const_cast<void*>(p)];
    std::erase_if(events, [&](const Event& e) { return done(e); });
    // One event per stream is enough, since a stream runs its work in order: a block fed every step without
    // being freed (the same pinned tensor) re-records its stream's event, so the list never grows past the
    // streams that read the block and nothing here waits. (A stream's handle is reused only after its
    // context has waited for it, so an event re-recorded under a reused handle covers nothing still pending.)
    auto it = std::find_if(events.begin(), events.end(), [&](const Event& e) { return e.stream == stream && e.device == device; });
    if (it != events.end()) {
      cuda_check(cudaEventRecord(it->e, stream), "cudaEventRecord");
      return;
    }
    Event e{nullptr, device, stream};
    if (auto s = std::find_if(spare_.begin(), spare_.end(), [&](const Event& x) { return x.device == device; }); s != spare_.end()) {
      e.e = s->e;
      spare_.erase(s);
    } else {
      cuda_check(cudaEventCreateWithFlags(&e.e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    }
    if (cudaError_t err = cudaEventRecord(e.e, stream); err != cudaSuccess) {
      spare_.push_back(e);
      cuda_fail(err, "cudaEventRecord");
    }
    events.push_back(e);
  }

 private:
  struct Event {
    cudaEvent_t e;
    int device;           // an event is recorded on streams of the device it was made on
    cudaStream_t stream;  // the stream of its last record
  };
  struct Waiting {
    void* p;
    size_t bytes;
    std::vector<Event> events;
  };
  /// Whether event `e` has completed; then it goes back to the spares.
  bool done(const Event& e) {
    const cudaError_t q = cudaEventQuery(e.e);
    if (q == cudaErrorNotReady) return false;
    if (q != cudaSuccess) cudaGetLastError();  // a failed copy reports itself where it was queued
    spare_.push_back(e);
    return true;
  }
  /// Moves the freed blocks whose copies have all run to `free_`.
  void reap() {
    std::erase_if(waiting_, [&](Waiting& w) {
      std::erase_if(w.events, [&](const Event& e) { return done(e); });
      if (!w.events.empty()) return false;
      free_.emplace(w.bytes, w.p);
      return true;
    });
  }

  std::mutex mu_;
  std::multimap<size_t, void*> free_;         // never returned to the driver: the process keeps its high-water mark
  std::map<void*, std::vector<Event>> busy_;  // live blocks with copies queued from them
  std::vector<Waiting> waiting_;              // freed blocks whose copies may not have run yet
  std::vector<Event> spare_;                  // completed events, for reuse
};

PinnedAllocator* pinned_instance() {
  static const bool device = cuda_device_count() > 0;
  if (!device) return nullptr;
  static PinnedAllocator* a = new PinnedAllocator;  // outlives every tensor, also those freed at exit
  return a;
}

}  // namespace

void cuda_state::pinned_in_use(const void* block, cudaStream_t stream, int device) {
  if (PinnedAllocator* a = pinned_instance()) a->in_use(block, stream, device);
}

Allocator* cuda_pinned_allocator() { return pinned_instance(); }

Allocator& cuda_allocator(int device) {
  // Never destroyed: a static object's device tensor may be freed after static destruction began.
  static std::mutex& m = *new std::mutex;
  static std::vector<std::unique_ptr<CudaAllocator>>& allocators = *new std::vector<std::unique_ptr<CudaAllocator>>;
  std::lock_guard lock(m);
  check_device(device);
  if (allocators.size() <= size_t(device)) allocators.resize(size_t(device) + 1);
  if (!allocators[size_t(device)]) allocators[size_t(device)] = std::make_unique<CudaAllocator>(device);
  return *allocators[size_t(device)];
}

}  // namespace oar
