// oar/device/cuda.hpp: what host code may ask of the CUDA backend: how many devices there are, the device
// context kernels run on (a stream and lazily created cuBLAS and cuDNN handles), and copies between places.
// Defined in kernels/cuda/ (context.cpp, allocators.cpp, copy.cpp) when oar is built with CUDA; without it
// (device/cuda-inl.hpp) there are no devices and asking for one is an oar::Error. No CUDA header is needed to
// include this one.
#pragma once
#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "oar/config.hpp"
#include "oar/core/dtype.hpp"
#include "oar/core/error.hpp"
#include "oar/device/device_context.hpp"

struct CUstream_st;    // cudaStream_t
struct CUevent_st;     // cudaEvent_t
struct cublasContext;  // cublasHandle_t
struct cudnnContext;   // cudnnHandle_t

namespace oar {

/// Number of usable CUDA devices; 0 without a driver, without a GPU, or in a build without CUDA.
int cuda_device_count();

class Communicator;  // device/communicator.hpp
/// NCCL's communicator on `device` over the ranks of `control` (MPI's world, or a world of one), which carries
/// NCCL's id from rank 0 and announces every collective first (kernels/cuda/nccl.cpp); collectives taking
/// longer than `timeout` are an oar::Error. Every rank must call it at the same point. An oar::Error in a
/// build without CUDA or NCCL, or without the device. oar::dist::Context::communicator(place) makes it.
std::shared_ptr<Communicator> make_nccl_communicator(int device, std::shared_ptr<Communicator> control, std::chrono::milliseconds timeout);

namespace detail {
// The process-wide switches below: read by the kernels launched after a change.
struct CudaSwitches {
  std::atomic<bool> tf32{false}, conv_search{false}, graphs{false};
};
inline CudaSwitches& cuda_switches() {
  static CudaSwitches s;
  return s;
}
}  // namespace detail

/// Lets cuBLAS and cuDNN compute f32 products in TF32 on tensor cores (inputs rounded to 10-bit mantissas,
/// f32 accumulation: several times the speed, about 1e-3 relative error). Off by default, so that a GPU's f32
/// results stay within f32 rounding of the CPU's; it applies to the kernels launched after the call.
inline void set_cuda_tf32(bool allowed) { detail::cuda_switches().tf32 = allowed; }
inline bool cuda_tf32() { return detail::cuda_switches().tf32; }

/// Lets the first call of each convolution shape on a GPU time cuDNN's algorithms for each pass (forward, data
/// and filter gradients; cudnnFind*AlgorithmEx on the call's own tensors) and keep the fastest deterministic one,
/// instead of taking cuDNN's heuristic first choice: PyTorch's `cudnn.benchmark`. The first call of a shape
/// then costs the search (the host waits for it); later ones run the kept algorithm. Off by default; shapes
/// met before the call keep their algorithm for the setting they were met under.
inline void set_cuda_conv_search(bool on) { detail::cuda_switches().conv_search = on; }
inline bool cuda_conv_search() { return detail::cuda_switches().conv_search; }

/// Lets an executor on a GPU capture a prepared block's kernels once as a CUDA graph and replay it on later
/// runs with the same feed shapes: the host then queues one launch per run instead of one per kernel (what
/// small models are bound by). A block is captured after two runs with unchanged shapes; a change of shapes
/// drops the graph (two more runs, then a new capture). Blocks whose results depend on host state that
/// changes from run to run are never captured: control flow, and random ops drawing from the executor's
/// counter (dropout without fix_seed). Off by default; it applies to the runs after the call.
inline void set_cuda_graphs(bool on) { detail::cuda_switches().graphs = on; }
inline bool cuda_graphs() { return detail::cuda_switches().graphs; }

/// Graphs captured, graph launches, and captures given up (a kernel that cannot be captured, or a block
/// that allocated device memory it kept): since the process began.
struct CudaGraphStats {
  int64_t captures = 0, launches = 0, abandoned = 0;
};
CudaGraphStats cuda_graph_stats();

/// One CUDA device as kernels see it. Kernels launch on stream(); the handles are bound to that stream.
class CudaContext final : public DeviceContext {
 public:
  /// An oar::Error when there is no such device.
  explicit CudaContext(int device, uint64_t seed = 0);
  ~CudaContext() override;
  Place place() const override { return cuda(device_); }
  void synchronize() const override;
  int device() const { return device_; }
  CUstream_st* stream() const { return stream_; }
  /// The cuBLAS handle, created on first use.
  cublasContext* cublas() const;
  /// The cuDNN handle, created on first use.
  cudnnContext* cudnn() const;

  /// Starts capturing what this thread queues on stream() into a graph (nothing runs until it is launched);
  /// the device memory this thread allocates and frees meanwhile is ordered on stream() and belongs to the graph.
  /// Only inside a run (follow_device_order) that is the device's one run under way; false, with nothing
  /// started, when another is. Runs that start meanwhile wait until the capture ends.
  bool begin_capture() override;
  /// Ends the capture: the instantiated graph, or null when it failed (a call that cannot be captured).
  /// `replayable` says whether it may be launched more than once: false when the captured work kept device
  /// memory it allocated, or freed memory allocated before (then launch it once and destroy it). Without a
  /// graph, `lost` receives the blocks allocated in the capture, as from abandon_capture.
  void* end_capture(bool* replayable, std::vector<void*>* lost = nullptr) override;
  /// Ends a capture given up (a call in it threw) without instantiating anything. Returns the blocks allocated
  /// in it that are still held: addresses of a graph that never ran, which their tensors must let go of before
  /// anything runs (freeing them is then a no-op).
  std::vector<void*> abandon_capture() override;
  /// Queues the graph on stream().
  void launch(void* graph) const override;
  /// A fence after the work queued on stream() so far.
  Fence record_fence() const override;
  /// Destroys a graph from end_capture (null allowed), once the work queued before has been ordered.
  static void destroy_graph(void* graph);

  /// The runs on one device follow each other in the order the host issues them, whatever context queues
  /// them: an executor run starts with follow_device_order() (this stream waits, on the device, for what the
  /// device's last run queued) and ends with end_device_order() (what this stream has queued becomes what the
  /// next run waits for). The host never waits for either. So an Optimizer's update, on its own executor,
  /// runs after the backward pass that wrote its gradients, and the next forward pass after the update, also
  /// when the feeds are already on the device and nothing is copied in between. Runs issued at once from
  /// several threads are not ordered among themselves. follow_device_order() also makes this context's device
  /// the calling thread's current one (kernels launch on the current device) and returns the one it replaced,
  /// which end_device_order() makes current again.
  int follow_device_order();
  void end_device_order(int previous_device) noexcept;

  // An executor run on this device (DeviceContext's interface, implemented in cuda-inl.hpp on the calls above).
  int begin_run() override { return follow_device_order(); }
  void end_run(int token) noexcept override { end_device_order(token); }
  bool put_feed(LoDTensor& dst, const LoDTensor& src, bool queue) override;
  bool take_fetch(const LoDTensor& t, LoDTensor& out, bool queue) override;
  std::shared_ptr<void> keep_graph(void* graph) const override;

 private:
  int device_;
  CUstream_st* stream_ = nullptr;
  CUevent_st* order_event_ = nullptr;  // recorded by end_device_order
  uint64_t followed_ = 0;              // the device's count of ended runs when this context last followed
  mutable cublasContext* cublas_ = nullptr;
  mutable void* cublas_workspace_ = nullptr;  // the handle's workspace (cublasSetWorkspace)
  mutable cudnnContext* cudnn_ = nullptr;
  mutable std::vector<std::pair<void*, int>> pending_frees_;  // freed while captured: released after the launch
};

namespace detail {
/// Copies `bytes` between any two places (host <-> device, device <-> device); waits for the copy, so the
/// source may be released and the destination read on the host right after.
void cuda_copy(void* dst, Place dst_place, const void* src, Place src_place, size_t bytes);
/// Queues on `ctx`'s stream a copy of `bytes` of host memory at `src` to the device's memory at `dst`. From
/// pageable memory it returns once the driver has staged the bytes (`src` may then go), normally without waiting
/// for the device's work (the driver may wait for the stream): for the small index plans kernels make on the host.
void cuda_upload(const CudaContext& ctx, void* dst, const void* src, size_t bytes);
/// Queues on `ctx`'s stream a copy of `bytes` from page-locked host memory (a pinned tensor's; `block` is its
/// storage's start) to the device's memory at `dst`, and returns before it has run: the pinned allocator gives
/// the block out again only once the copy is done, but the tensor itself must not be written meanwhile (until
/// a fetch of the run has come back, or the executor's device().synchronize()).
void cuda_copy_from_pinned(const CudaContext& ctx, void* dst, const void* src, size_t bytes, const void* block);
/// Queues on `ctx`'s stream a copy of `bytes` from the device's memory at `src` to page-locked host memory at
/// `dst` (a pinned tensor's; `block` is its storage's start), and returns before it has run: the bytes are there
/// once a fence recorded after it is done. Freed meanwhile, the block is given out again only after the copy.
void cuda_download_to_pinned(const CudaContext& ctx, void* dst, const void* src, size_t bytes, const void* block);
/// Queues on `ctx`'s stream a copy of `rows` rows of `width` bytes within the device's memory, row r from
/// src + r * src_pitch to dst + r * dst_pitch (a column block of a row-major matrix: concat, split).
void cuda_copy_rows(const CudaContext& ctx, void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows);
/// Queues on `ctx`'s stream the zeroing of `bytes` of the device's memory at `dst`.
void cuda_zero(const CudaContext& ctx, void* dst, size_t bytes);
/// Queues on `ctx`'s stream one kernel moving n rows of `row_bytes`: dst row dst_rows[i] (i where dst_rows is
/// null) = src row src_rows[i] (i where null), the row lists int64 in the device's memory.
void cuda_move_rows(const CudaContext& ctx, void* dst, const void* src, size_t row_bytes, int64_t n, const int64_t* dst_rows, const int64_t* src_rows);
/// Queues on `ctx`'s stream dst[i] += src[i] for n elements of `dtype` (f32, f64, i32, i64) in the device's memory.
void cuda_accumulate(const CudaContext& ctx, DType dtype, void* dst, const void* src, int64_t n);
}  // namespace detail

/// The context kernels on `place` run with: a CpuContext, or a CudaContext for that device.
std::unique_ptr<DeviceContext> make_device_context(Place place, uint64_t seed = 0);

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/device/cuda-inl.hpp"
#endif
