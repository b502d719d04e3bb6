// kernels/cuda/detail/device_state.hpp: the host state the CUDA backend's units share (context.cpp, allocators.cpp,
// copy.cpp): error checks, each device's run order and capture gate, this thread's capture, the blocks a capture
// left without memory, and the pinned allocator's bookkeeping. Internal to oar_cuda (it includes the CUDA
// runtime's header); nothing outside this folder includes it.
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "oar/device/capture_gate.hpp"
#include "oar/device/cuda.hpp"

namespace oar::cuda_state {

[[noreturn]] void cuda_fail(cudaError_t e, const char* what);
inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) [[unlikely]] cuda_fail(e, what);
}

void check_device(int device);

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
DeviceOrder& device_order(int device);

/// Gives the device's capture claim (CudaContext::begin_capture) back: the runs and visits waiting for it go on.
void release_capture_claim(int device) noexcept;

/// Gives it back when it goes, however the function holding it ends.
struct CaptureClaim {
  int device;
  ~CaptureClaim() { release_capture_claim(device); }
};

// While this thread captures a graph (CudaContext::begin_capture): the stream captured, the blocks allocated
// since (their frees become the graph's), and whether the captured work kept or freed memory it should not.
extern thread_local cudaStream_t tl_capture;
extern thread_local std::vector<void*>* tl_captured;
extern thread_local bool tl_capture_unsafe;
extern thread_local std::vector<std::pair<void*, int>>* tl_deferred;  // frees of older blocks, done after the capture

// The runs under way in this thread, per device (follow_device_order .. end_device_order): device work done
// inside one belongs to that run and is no visit of the device's gate. A plain array, so that a free during
// the process's exit, after this thread's objects are gone, still reads it; devices past it are never counted
// (their work inside runs visits the gate too, which is slower but safe).
constexpr int kCountedDevices = 64;
extern thread_local int tl_runs[kCountedDevices];
// Per thread: a pool worker helping a run would count as outside it (and wait for the run's own capture); no
// CUDA kernel uses the pool, and an Optimizer with threads is refused on a GPU.
inline bool in_run(int device) { return device < kCountedDevices && tl_runs[device] > 0; }

/// The gate that this thread's work on `device`'s legacy stream (an allocation, a free, a synchronous copy) must
/// visit: null inside a run of this thread on that device, and while this thread captures (that work gives its
/// own capture up, and a capturing thread never waits).
detail::CaptureGate* visit_gate(int device);

extern std::atomic<int64_t> g_captures, g_launches, g_abandoned;

/// Whether `p` was allocated inside a capture that was given up (and forgets it): its free is then a no-op.
bool forget_unbacked(void* p);
/// Blocks allocated in a capture that never became a graph: remembered as unbacked, and handed to `lost`.
void keep_unbacked(const std::vector<void*>& captured, std::vector<void*>* lost);

/// The capture's lists this thread kept (blocks allocated in it, older blocks it freed), taken as it ends.
struct CaptureLists {
  std::unique_ptr<std::vector<void*>> captured;
  std::unique_ptr<std::vector<std::pair<void*, int>>> deferred;
};
CaptureLists take_capture_lists();

/// Frees block `p` of device `d` in the order of `stream` when it is that device's (null: the legacy stream).
/// Another device's block goes on that device's legacy stream: a visit of its gate, like any free outside a run.
void free_block(void* p, int d, cudaStream_t stream, int stream_device);

/// Tells the pinned allocator that a copy just queued on `stream` (of `device`) uses `block`.
void pinned_in_use(const void* block, cudaStream_t stream, int device);

}  // namespace oar::cuda_state
