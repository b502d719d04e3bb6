// kernels/cuda/context.cpp: the host side of the CUDA backend (device/cuda.hpp): device discovery, the
// CudaContext (one stream per context; cuBLAS and cuDNN handles bound to it, created on first use), the order of
// runs on a device, fences and graph capture. The allocators are in allocators.cpp, the copies in copy.cpp. Plain
// C++ on the CUDA runtime API, so it is compiled by the host compiler and may use fmt and oar::Error.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "kernels/cuda/detail/device_state.hpp"
#include "oar/device/cuda.hpp"

namespace oar::cuda_state {

[[noreturn]] void cuda_fail(cudaError_t e, const char* what) {
  cudaGetLastError();  // clear a sticky error so the next call reports its own
  throw Error(fmt::format("CUDA: {} failed: {} ({})", what, cudaGetErrorString(e), int(e)));
}

void check_device(int device) {
  const int n = cuda_device_count();
  if (device < 0 || device >= n)
    throw Error(n == 0 ? fmt::format("no CUDA device {}: no GPU or no driver on this machine", device)
                       : fmt::format("no CUDA device {}: this machine has {} (cuda:0 .. cuda:{})", device, n, n - 1));
}

DeviceOrder& device_order(int device) {
  // Never destroyed: a CudaContext that outlives static destruction (one a static object owns) still finds it.
  static std::mutex& m = *new std::mutex;
  static std::vector<std::unique_ptr<DeviceOrder>>& orders = *new std::vector<std::unique_ptr<DeviceOrder>>;
  std::lock_guard lock(m);
  if (orders.size() <= size_t(device)) orders.resize(size_t(device) + 1);
  if (!orders[size_t(device)]) orders[size_t(device)] = std::make_unique<DeviceOrder>();
  return *orders[size_t(device)];
}

void release_capture_claim(int device) noexcept { device_order(device).gate.end_capture(); }

thread_local cudaStream_t tl_capture = nullptr;
thread_local std::vector<void*>* tl_captured = nullptr;
thread_local bool tl_capture_unsafe = false;
thread_local std::vector<std::pair<void*, int>>* tl_deferred = nullptr;  // frees of older blocks, done after the capture
thread_local int tl_runs[kCountedDevices] = {};

detail::CaptureGate* visit_gate(int device) {
  if (tl_capture || in_run(device)) return nullptr;
  return &device_order(device).gate;
}

std::atomic<int64_t> g_captures{0}, g_launches{0}, g_abandoned{0};

CaptureLists take_capture_lists() {
  CaptureLists lists{std::unique_ptr<std::vector<void*>>(tl_captured), std::unique_ptr<std::vector<std::pair<void*, int>>>(tl_deferred)};
  tl_capture = nullptr;
  tl_captured = nullptr;
  tl_deferred = nullptr;
  return lists;
}

}  // namespace oar::cuda_state

namespace oar {

using namespace cuda_state;

namespace {

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

}  // namespace

int cuda_device_count() {
  int n = 0;
  // NOTE: without a driver cudaGetDeviceCount fails and leaves n untouched; clear the sticky error.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
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

}  // namespace oar
