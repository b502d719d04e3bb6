// kernels/cuda/copy.cpp: copies between places and within a device's memory, each on the stream it must be
// ordered on (the legacy stream for the synchronous ones, a context's stream for the queued ones).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/detail/device_state.hpp"
#include "kernels/cuda/elementwise_launch.hpp"
#include "kernels/cuda/launch.hpp"
#include "kernels/cuda/sequence_shape_launch.hpp"
#include "oar/device/cuda.hpp"

namespace oar {

using namespace cuda_state;

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
    pinned_in_use(block, ctx.stream(), ctx.device());
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
