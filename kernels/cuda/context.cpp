// kernels/cuda/context.cpp: the host side of the CUDA backend (runtime/cuda.hpp): device discovery, the
// CudaContext (one stream per context; cuBLAS and cuDNN handles bound to it, created on first use), each
// device's caching allocator and copies between places. Plain C++ on the CUDA runtime API, so it is compiled
// by the host compiler and may use fmt and oar::Error.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <map>
#include <mutex>
#include <new>
#include <set>
#include <vector>

#include "kernels/cuda/launch.hpp"
#include "oar/device/allocator.hpp"
#include "oar/device/capture_gate.hpp"
#include "oar/device/cuda.hpp"

namespace oar {

namespace {

[[noreturn]] void cuda_fail(cudaError_t e, const char* what) {
  cudaGetLastError();  // clear a sticky error so the next call reports its own
  throw Error(fmt::format("CUDA: {} failed: {} ({})", what, cudaGetErrorString(e), int(e)));
}
void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) [[unlikely]] cuda_fail(e, what);
}

void check_device(int device) {
  const int n = cuda_device_count();
  if (device < 0 || device >= n)
    throw Error(n == 0 ? fmt::format("no CUDA device {}: no GPU or no driver on this machine", device)
                       : fmt::format("no CUDA device {}: this machine has {} (cuda:0 .. cuda:{})", device, n, n - 1));
}

/// Selects `device` for the calling thread and restores the previous device when it goes out of scope.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : device_(device) {
    cuda_check(cudaGetDevice(&prev_), "cudaGetDevice");
    if (prev_ != device) cuda_check(cudaSetDevice(device), "cudaSetDevice");
  }
  // Only when it changed: a guard is made on every run, copy and free, and each cudaSetDevice costs the host.
  ~DeviceGuard() {
    if (prev_ != device_) cudaSetDevice(prev_);
  }

 private:
  int device_ = 0;
  int prev_ = 0;
};

/// What the next run on a device waits for (CudaContext::follow_device_order): the event its last run
/// recorded, the context that recorded it (which need not wait for itself), and how many runs have ended.
/// Also the device's capture gate: the runs under way, the device work outside runs, and whether a run
/// captures a graph (detail::CaptureGate says why they are kept apart).
struct DeviceOrder {
  std::mutex mu;
  cudaEvent_t tail = nullptr;
  const CudaContext* owner = nullptr;
  uint64_t ended = 0;
  detail::CaptureGate gate;
};
DeviceOrder& device_order(int device) {
  // Never destroyed: a CudaContext that outlives static destruction (one a static object owns) still finds it.
  static std::mutex& m = *new std::mutex;
  static std::vector<std::unique_ptr<DeviceOrder>>& orders = *new std::vector<std::unique_ptr<DeviceOrder>>;
  std::lock_guard lock(m);
  if (orders.size() <= size_t(device)) orders.resize(size_t(device) + 1);
  if (!orders[size_t(device)]) orders[size_t(device)] = std::make_unique<DeviceOrder>();
  return *orders[size_t(device)];
}

/// Gives the device's capture claim (CudaContext::begin_capture) back: the runs and visits waiting for it go on.
void release_capture_claim(int device) noexcept { device_order(device).gate.end_capture(); }

/// Gives it back when it goes, however the function holding it ends.
struct CaptureClaim {
  int device;
  ~CaptureClaim() { release_capture_claim(device); }
};

// While this thread captures a graph (CudaContext::begin_capture): the stream captured, the blocks allocated
// since (their frees become the graph's), and whether the captured work kept or freed memory it should not.
thread_local cudaStream_t tl_capture = nullptr;
thread_local std::vector<void*>* tl_captured = nullptr;
thread_local bool tl_capture_unsafe = false;
thread_local std::vector<std::pair<void*, int>>* tl_deferred = nullptr;  // frees of older blocks, done after the capture

// The runs under way in this thread, per device (follow_device_order .. end_device_order): device work done
// inside one belongs to that run and is no visit of the device's gate. A plain array, so that a free during
// the process's exit, after this thread's objects are gone, still reads it; devices past it are never counted
// (their work inside runs visits the gate too, which is slower but safe).
constexpr int kCountedDevices = 64;
thread_local int tl_runs[kCountedDevices] = {};
// Per thread: a pool worker helping a run would count as outside it (and wait for the run's own capture); no
// CUDA kernel uses the pool, and an Optimizer with threads is refused on a GPU.
bool in_run(int device) { return device < kCountedDevices && tl_runs[device] > 0; }

/// The gate that this thread's work on `device`'s legacy stream (an allocation, a free, a synchronous copy) must
/// visit: null inside a run of this thread on that device, and while this thread captures (that work gives its
/// own capture up, and a capturing thread never waits).
detail::CaptureGate* visit_gate(int device) {
  if (tl_capture || in_run(device)) return nullptr;
  return &device_order(device).gate;
}

std::atomic<int64_t> g_captures{0}, g_launches{0}, g_abandoned{0};

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

/// Blocks allocated in a capture that never became a graph: remembered as unbacked, and handed to `lost`.
void keep_unbacked(const std::vector<void*>& captured, std::vector<void*>* lost) {
  if (captured.empty()) return;
  {
    std::lock_guard lock(unbacked_mutex());
    unbacked().insert(captured.begin(), captured.end());
    g_any_unbacked = true;
  }
  if (lost) lost->insert(lost->end(), captured.begin(), captured.end());
}

/// The capture's lists this thread kept (blocks allocated in it, older blocks it freed), taken as it ends.
struct CaptureLists {
  std::unique_ptr<std::vector<void*>> captured;
  std::unique_ptr<std::vector<std::pair<void*, int>>> deferred;
};
CaptureLists take_capture_lists() {
  CaptureLists lists{std::unique_ptr<std::vector<void*>>(tl_captured), std::unique_ptr<std::vector<std::pair<void*, int>>>(tl_deferred)};
  tl_capture = nullptr;
  tl_captured = nullptr;
  tl_deferred = nullptr;
  return lists;
}

/// Frees block `p` of device `d` in the order of `stream` when it is that device's (null: the legacy stream).
/// Another device's block goes on that device's legacy stream: a visit of its gate, like any free outside a run.
void free_block(void* p, int d, cudaStream_t stream, int stream_device) {
  const detail::GateVisit visit(d == stream_device ? nullptr : visit_gate(d));
  DeviceGuard g(d);
  if (cudaFreeAsync(p, d == stream_device ? stream : nullptr) != cudaSuccess) cudaGetLastError();  // a free's error is no kernel's
}

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

/// Events for fences, kept per device once their fences are gone (creating one is a driver call). An event
/// blocks its waiting thread when the device was set up with cudaDeviceScheduleBlockingSync, as the device's
/// other waits (cudaMemcpy, cudaStreamSynchronize) then do; cudaEventSynchronize would spin otherwise.
class FenceEvents {
 public:
  /// An event of `device` (the current device), blocking or not as the device's flags say now (the primary
  /// context's flags may change while it lives).
  cudaEvent_t take(int device) {
    unsigned flags = 0;
    cuda_check(cudaGetDeviceFlags(&flags), "cudaGetDeviceFlags");
    const bool blocking = (flags & cudaDeviceScheduleMask) == cudaDeviceScheduleBlockingSync;
    {
      std::lock_guard lock(mu_);
      if (auto it = spare_.find({device, blocking}); it != spare_.end() && !it->second.empty()) {
        cudaEvent_t e = it->second.back();
        it->second.pop_back();
        return e;
      }
    }
    cudaEvent_t e = nullptr;
    cuda_check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming | (blocking ? cudaEventBlockingSync : 0u)), "cudaEventCreateWithFlags");
    try {
      std::lock_guard lock(mu_);
      blocking_[e] = blocking;
    } catch (...) {
      cudaEventDestroy(e);
      throw;
    }
    return e;
  }
  void give_back(int device, cudaEvent_t e) noexcept {
    try {
      std::lock_guard lock(mu_);
      spare_[{device, blocking_[e]}].push_back(e);
    } catch (...) {
      cudaEventDestroy(e);
    }
  }

 private:
  std::mutex mu_;
  std::map<std::pair<int, bool>, std::vector<cudaEvent_t>> spare_;  // by device and blocking
  std::map<cudaEvent_t, bool> blocking_;                            // every event made: whether it blocks
};

FenceEvents& fence_events() {
  static FenceEvents* f = new FenceEvents;  // outlives every fence, also those destroyed at exit
  return *f;
}

PinnedAllocator* pinned_instance() {
  static const bool device = cuda_device_count() > 0;
  if (!device) return nullptr;
  static PinnedAllocator* a = new PinnedAllocator;  // outlives every tensor, also those freed at exit
  return a;
}

}  // namespace

Allocator* cuda_pinned_allocator() { return pinned_instance(); }

int cuda_device_count() {
  int n = 0;
  // NOTE: without a driver cudaGetDeviceCount fails and leaves n untouched; clear the sticky error.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

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

CudaContext::CudaContext(int device, uint64_t seed) : DeviceContext(seed), device_(device) {
  check_device(device);
  DeviceGuard g(device);
  cudaStream_t s = nullptr;
  cuda_check(cudaStreamCreate(&s), "cudaStreamCreate");
  stream_ = s;
}

CudaContext::~CudaContext() {
  DeviceGuard g(device_);
  // Freeing the cuBLAS workspace synchronises the device, which a capture of another thread would refuse.
  const detail::GateVisit visit(visit_gate(device_));
  // The work this context queued is done before it goes, so that no later run needs to wait for it.
  if (stream_ && cudaStreamSynchronize(stream_) != cudaSuccess) cudaGetLastError();
  {
    DeviceOrder& o = device_order(device_);
    std::lock_guard lock(o.mu);
    if (o.owner == this) {
      o.owner = nullptr;
      o.tail = nullptr;
    }
  }
  if (order_event_) cudaEventDestroy(order_event_);
  if (cudnn_) cudnnDestroy(cudnn_);
  if (cublas_) cublasDestroy(cublas_);
  if (cublas_workspace_) cudaFree(cublas_workspace_);
  if (stream_) cudaStreamDestroy(stream_);
}

int CudaContext::follow_device_order() {
  int previous = device_;
  cuda_check(cudaGetDevice(&previous), "cudaGetDevice");
  if (previous != device_) cuda_check(cudaSetDevice(device_), "cudaSetDevice");
  DeviceOrder& o = device_order(device_);
  o.gate.enter_run(!tl_capture);  // (a run nested in this thread's capture would wait for itself)
  {
    std::lock_guard lock(o.mu);
    if (o.owner && o.owner != this) {
      if (cudaError_t e = cudaStreamWaitEvent(stream_, o.tail, 0); e != cudaSuccess) {
        o.gate.leave_run();
        if (previous != device_) cudaSetDevice(previous);  // the caller's guard is not made yet
        cuda_fail(e, "cudaStreamWaitEvent");
      }
    }
    followed_ = o.ended;
  }
  if (device_ < kCountedDevices) ++tl_runs[device_];
  return previous;
}

void CudaContext::end_device_order(int previous_device) noexcept {
  // The run's device is current (follow_device_order), as creating the event for its stream requires.
  if (!order_event_ && cudaEventCreateWithFlags(&order_event_, cudaEventDisableTiming) != cudaSuccess) order_event_ = nullptr;
  DeviceOrder& o = device_order(device_);
  struct Leave {  // last: the device, then the run's place at the gate
    DeviceOrder& o;
    int device, previous;
    ~Leave() {
      if (previous != device) cudaSetDevice(previous);
      if (device < kCountedDevices) --tl_runs[device];
      o.gate.leave_run();
    }
  } leave{o, device_, previous_device};
  std::lock_guard lock(o.mu);
  // Runs of other threads that ended while this one ran: this tail covers them too, so that the next run,
  // waiting for this tail alone, follows every run that ended before it.
  if (o.ended != followed_ && o.owner && o.owner != this && cudaStreamWaitEvent(stream_, o.tail, 0) != cudaSuccess) cudaGetLastError();
  ++o.ended;
  if (order_event_ && cudaEventRecord(order_event_, stream_) == cudaSuccess) {
    o.tail = order_event_;
    o.owner = this;
    return;
  }
  // Without an event this stream's work cannot be waited for on the device: the host waits for it instead.
  cudaGetLastError();
  cudaStreamSynchronize(stream_);
  cudaGetLastError();
  if (o.owner == this) {
    o.owner = nullptr;
    o.tail = nullptr;
  }
}

void CudaContext::synchronize() const {
  DeviceGuard g(device_);
  cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

cublasContext* CudaContext::cublas() const {
  if (!cublas_) {
    DeviceGuard g(device_);
    cublasHandle_t h = nullptr;
    if (cublasStatus_t st = cublasCreate(&h); st != CUBLAS_STATUS_SUCCESS)
      throw Error(fmt::format("cuBLAS: cublasCreate failed on cuda:{} (status {})", device_, int(st)));
    cublasSetStream(h, stream_);
    // A workspace of the handle's own (the size cuBLAS's documentation recommends: 32 MiB from Hopper on, 4 MiB
    // before), so that cuBLAS neither allocates a new one inside every captured graph nor picks its kernels by
    // what other streams run: results then repeat bit for bit, eager or replayed. Without it (no memory, or a
    // first call inside a capture), cuBLAS manages its own.
    int major = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_);
    const size_t bytes = size_t(major >= 9 ? 32 : 4) << 20;
    if (!tl_capture && cudaMalloc(&cublas_workspace_, bytes) == cudaSuccess) {
      if (cublasSetWorkspace(h, cublas_workspace_, bytes) != CUBLAS_STATUS_SUCCESS) {
        cudaFree(cublas_workspace_);
        cublas_workspace_ = nullptr;
      }
    } else {
      cublas_workspace_ = nullptr;
    }
    cudaGetLastError();
    cublas_ = h;
  }
  return cublas_;
}

cudnnContext* CudaContext::cudnn() const {
  if (!cudnn_) {
    DeviceGuard g(device_);
    cudnnHandle_t h = nullptr;
    if (cudnnStatus_t st = cudnnCreate(&h); st != CUDNN_STATUS_SUCCESS)
      throw Error(fmt::format("cuDNN: cudnnCreate failed on cuda:{}: {}", device_, cudnnGetErrorString(st)));
    cudnnSetStream(h, stream_);
    cudnn_ = h;
  }
  return cudnn_;
}

Fence CudaContext::record_fence() const {
  DeviceGuard g(device_);
  cudaEvent_t e = fence_events().take(device_);
  if (cudaError_t err = cudaEventRecord(e, stream_); err != cudaSuccess) {
    fence_events().give_back(device_, e);
    cuda_fail(err, "cudaEventRecord");
  }
  Fence f;
  const int device = device_;
  f.event_ = std::shared_ptr<CUevent_st>(e, [device](CUevent_st* x) { fence_events().give_back(device, x); });
  return f;
}

bool Fence::done() const {
  if (!event_) return true;
  const cudaError_t e = cudaEventQuery(event_.get());
  if (e == cudaErrorNotReady) return false;
  cuda_check(e, "cudaEventQuery");
  return true;
}

void Fence::wait() const {
  if (event_) cuda_check(cudaEventSynchronize(event_.get()), "cudaEventSynchronize");
}

CudaGraphStats cuda_graph_stats() { return {g_captures.load(), g_launches.load(), g_abandoned.load()}; }

bool CudaContext::begin_capture() {
  if (tl_capture) throw Error("CUDA graphs: this thread is already capturing");
  // Not while another run, or another thread's work outside runs, is under way on the device.
  if (!device_order(device_).gate.try_capture()) return false;
  try {  // whatever fails below, the claim is given back: other runs wait on it
    auto captured = std::make_unique<std::vector<void*>>();
    auto deferred = std::make_unique<std::vector<std::pair<void*, int>>>();
    DeviceGuard g(device_);
    cuda_check(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    tl_capture = stream_;
    tl_captured = captured.release();
    tl_deferred = deferred.release();
    tl_capture_unsafe = false;
    return true;
  } catch (...) {
    release_capture_claim(device_);
    throw;
  }
}

void* CudaContext::end_capture(bool* replayable, std::vector<void*>* lost) {
  const CaptureClaim claim{device_};
  DeviceGuard g(device_);
  cudaGraph_t graph = nullptr;
  const cudaError_t e = cudaStreamEndCapture(stream_, &graph);
  auto [captured, deferred] = take_capture_lists();
  const bool kept = !captured->empty();
  cudaGraphExec_t exec = nullptr;
  if (e == cudaSuccess && graph) {
    if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) exec = nullptr;
    cudaGraphDestroy(graph);
  }
  cudaGetLastError();  // a failed capture leaves its error behind
  // Frees of blocks older than the capture: ordered after the graph's first launch (the caller launches it
  // once before it destroys it), or now when there is no graph.
  if (!exec) {
    for (auto [p, d] : *deferred) free_block(p, d, nullptr, device_);
    keep_unbacked(*captured, lost);
  } else
    pending_frees_.insert(pending_frees_.end(), deferred->begin(), deferred->end());
  if (replayable) *replayable = exec && !kept && !tl_capture_unsafe;
  if (exec) ++g_captures;
  else ++g_abandoned;
  return exec;
}

void CudaContext::launch(void* graph) const {
  DeviceGuard g(device_);
  cuda_check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), stream_), "cudaGraphLaunch");
  ++g_launches;
  // Blocks freed while the graph was captured: after its (first) launch, in stream order.
  for (auto [p, d] : pending_frees_) free_block(p, d, stream_, device_);
  pending_frees_.clear();
}

std::vector<void*> CudaContext::abandon_capture() {
  const CaptureClaim claim{device_};
  DeviceGuard g(device_);
  cudaGraph_t graph = nullptr;
  if (cudaStreamEndCapture(stream_, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);  // never instantiated
  cudaGetLastError();
  auto [captured, deferred] = take_capture_lists();
  // Nothing captured will run: the older blocks freed meanwhile go now, in the legacy stream's order.
  for (auto [p, d] : *deferred) free_block(p, d, nullptr, device_);
  std::vector<void*> lost;
  keep_unbacked(*captured, &lost);
  ++g_abandoned;
  return lost;
}

void CudaContext::destroy_graph(void* graph) {
  if (graph) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph));
}

void detail::cuda_copy(void* dst, Place dp, const void* src, Place sp, size_t bytes) {
  if (dp.is_cuda()) check_device(dp.device);
  if (sp.is_cuda()) check_device(sp.device);
  if (dp.is_cuda() && sp.is_cuda() && dp.device != sp.device) {  // on both devices' legacy streams
    // cudaMemcpyPeer is ordered after the current device's work too: made the destination, so that no third
    // device's capture is given up by it.
    DeviceGuard g(dp.device);
    const detail::GateVisit first(visit_gate(std::min(dp.device, sp.device))), second(visit_gate(std::max(dp.device, sp.device)));
    cuda_check(cudaMemcpyPeer(dst, dp.device, src, sp.device, bytes), "cudaMemcpyPeer");
    return;
  }
  const int device = dp.is_cuda() ? dp.device : sp.device;
  DeviceGuard g(device);
  const cudaMemcpyKind kind = dp.is_cuda() ? (sp.is_cuda() ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice) : cudaMemcpyDeviceToHost;
  // A kernel's copy on the device (assign, a sum of one input, an update op out of place) while this thread
  // captures a graph: on the captured stream, where the kernel's other work is. The legacy stream may not be
  // used then; a copy to or from the host stays refused, which gives up the capture.
  if (tl_capture && kind == cudaMemcpyDeviceToDevice) {
    cuda_check(cudaMemcpyAsync(dst, src, bytes, kind, tl_capture), "cudaMemcpyAsync");
    return;
  }
  // NOTE: cudaMemcpy on the legacy default stream waits for the work queued before it on every blocking
  // stream, so a fetch sees the kernels that produced it.
  const detail::GateVisit visit(visit_gate(device));
  cuda_check(cudaMemcpy(dst, src, bytes, kind), "cudaMemcpy");
}

namespace {
/// Queues a copy between host and device memory on `ctx`'s stream (its device current). Never while the
/// stream is captured: a captured copy would read or write the host memory again at every replay, long after
/// its owner let go of it; refused, which makes the executor give up the capture and run the block op by op.
void queue_host_copy(const CudaContext& ctx, void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  cuda_check(cudaStreamIsCapturing(ctx.stream(), &capturing), "cudaStreamIsCapturing");
  if (capturing != cudaStreamCaptureStatusNone)
    throw Error(kind == cudaMemcpyHostToDevice ? "a copy of host values to the device cannot be captured in a CUDA graph"
                                               : "a copy of device values to the host cannot be captured in a CUDA graph");
  cuda_check(cudaMemcpyAsync(dst, src, bytes, kind, ctx.stream()), "cudaMemcpyAsync");
}

/// Tells the pinned allocator that the copy just queued on `ctx`'s stream uses `block` (its device current).
void mark_pinned_in_use(const CudaContext& ctx, const void* block) {
  try {
    if (PinnedAllocator* a = pinned_instance()) a->in_use(block, ctx.stream(), ctx.device());
  } catch (...) {  // the block cannot be marked: the copy is waited for instead
    cudaStreamSynchronize(ctx.stream());
    throw;
  }
}
}  // namespace

void detail::cuda_upload(const CudaContext& ctx, void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  DeviceGuard g(ctx.device());
  queue_host_copy(ctx, dst, src, bytes, cudaMemcpyHostToDevice);
}

void detail::cuda_copy_from_pinned(const CudaContext& ctx, void* dst, const void* src, size_t bytes, const void* block) {
  if (!bytes) return;
  DeviceGuard g(ctx.device());
  queue_host_copy(ctx, dst, src, bytes, cudaMemcpyHostToDevice);
  mark_pinned_in_use(ctx, block);
}

void detail::cuda_download_to_pinned(const CudaContext& ctx, void* dst, const void* src, size_t bytes, const void* block) {
  if (!bytes) return;
  DeviceGuard g(ctx.device());
  queue_host_copy(ctx, dst, src, bytes, cudaMemcpyDeviceToHost);
  mark_pinned_in_use(ctx, block);
}

void detail::cuda_copy_rows(const CudaContext& ctx, void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows) {
  if (!width || !rows) return;
  DeviceGuard g(ctx.device());
  if (rows == 1 || (dst_pitch == width && src_pitch == width))  // one block: no pitch limit (a 2-D copy's pitch is capped)
    cuda_check(cudaMemcpyAsync(dst, src, width * rows, cudaMemcpyDeviceToDevice, ctx.stream()), "cudaMemcpyAsync");
  else
    cuda_check(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, width, rows, cudaMemcpyDeviceToDevice, ctx.stream()), "cudaMemcpy2DAsync");
}

void detail::cuda_zero(const CudaContext& ctx, void* dst, size_t bytes) {
  if (!bytes) return;
  DeviceGuard g(ctx.device());
  cuda_check(cudaMemsetAsync(dst, 0, bytes, ctx.stream()), "cudaMemsetAsync");
}

void detail::cuda_move_rows(const CudaContext& ctx, void* dst, const void* src, size_t row_bytes, int64_t n, const int64_t* dst_rows,
                            const int64_t* src_rows) {
  if (!row_bytes || n <= 0) return;
  DeviceGuard g(ctx.device());
  cuda_check(cudaError_t(cuda_kernels::copy_rows(1, src, src_rows, dst, dst_rows, n, int64_t(row_bytes), nullptr, 0, ctx.stream())), "copy_rows");
}

void detail::cuda_accumulate(const CudaContext& ctx, DType dtype, void* dst, const void* src, int64_t n) {
  if (n <= 0) return;
  cuda_kernels::Elem e;
  switch (dtype) {
    case DType::f32: e = cuda_kernels::Elem::f32; break;
    case DType::f64: e = cuda_kernels::Elem::f64; break;
    case DType::i32: e = cuda_kernels::Elem::i32; break;
    case DType::i64: e = cuda_kernels::Elem::i64; break;
    default: throw Error(fmt::format("cannot add {} tensors on a CUDA device (f32, f64, i32, i64 only)", name(dtype)));
  }
  DeviceGuard g(ctx.device());
  cuda_check(cudaError_t(cuda_kernels::accumulate(e, src, dst, n, ctx.stream())), "accumulate");
}

}  // namespace oar
