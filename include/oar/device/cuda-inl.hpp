// oar/device/cuda-inl.hpp: the implementation of cuda.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/device/cuda.hpp"

#include <cstring>

#include "oar/device/tensor.hpp"

namespace oar {

namespace detail {
/// The largest host tensor a GPU run copies through page-locked memory without waiting (a feed staged, a value
/// fetched by a run with a fence); larger ones are copied synchronously, so that pinned blocks stay few and small.
inline constexpr size_t kMaxQueuedHostCopy = size_t(64) << 20;
/// A page-locked host tensor, or an empty one when no more memory can be pinned (the caller then copies
/// synchronously, as from ordinary memory).
inline Tensor try_page_locked(const Shape& shape, DType dtype) {
  try {
    return Tensor::page_locked(shape, dtype);
  } catch (const Error&) {
    return Tensor();
  }
}
}  // namespace detail

// With CUDA, kernels/cuda/context.cpp, allocators.cpp and copy.cpp define these.
#if !OAR_WITH_CUDA
OAR_FUNC int cuda_device_count() { return 0; }
OAR_FUNC std::shared_ptr<Communicator> make_nccl_communicator(int device, std::shared_ptr<Communicator>, std::chrono::milliseconds) {
  throw Error(fmt::format("data parallel on cuda:{} needs NCCL, and this oar was built without CUDA", device));
}
OAR_FUNC CudaContext::CudaContext(int device, uint64_t seed) : DeviceContext(seed), device_(device) {
  throw Error(fmt::format("no CUDA device {}: oar was built without CUDA (configure with the CUDA toolkit present)", device));
}
OAR_FUNC CudaContext::~CudaContext() = default;
OAR_FUNC void CudaContext::synchronize() const {}
OAR_FUNC cublasContext* CudaContext::cublas() const { return nullptr; }
OAR_FUNC cudnnContext* CudaContext::cudnn() const { return nullptr; }
OAR_FUNC void detail::cuda_copy(void*, Place dst, const void*, Place src, size_t) {
  throw Error(fmt::format("cannot copy {} -> {}: oar was built without CUDA", src.str(), dst.str()));
}
OAR_FUNC void detail::cuda_copy_rows(const CudaContext&, void*, size_t, const void*, size_t, size_t, size_t) {
  throw Error("cannot copy on a CUDA device: oar was built without CUDA");
}
OAR_FUNC void detail::cuda_zero(const CudaContext&, void*, size_t) { throw Error("cannot write on a CUDA device: oar was built without CUDA"); }
OAR_FUNC void detail::cuda_move_rows(const CudaContext&, void*, const void*, size_t, int64_t, const int64_t*, const int64_t*) {
  throw Error("cannot copy on a CUDA device: oar was built without CUDA");
}
OAR_FUNC void detail::cuda_accumulate(const CudaContext&, DType, void*, const void*, int64_t) {
  throw Error("cannot add on a CUDA device: oar was built without CUDA");
}
OAR_FUNC CudaGraphStats cuda_graph_stats() { return {}; }
OAR_FUNC bool CudaContext::begin_capture() { throw Error("CUDA graphs: oar was built without CUDA"); }
OAR_FUNC void* CudaContext::end_capture(bool* replayable, std::vector<void*>*) {
  if (replayable) *replayable = false;
  return nullptr;
}
OAR_FUNC std::vector<void*> CudaContext::abandon_capture() { return {}; }
OAR_FUNC void CudaContext::launch(void*) const { throw Error("CUDA graphs: oar was built without CUDA"); }
OAR_FUNC void CudaContext::destroy_graph(void*) {}
OAR_FUNC int CudaContext::follow_device_order() { return 0; }
OAR_FUNC void CudaContext::end_device_order(int) noexcept {}
OAR_FUNC void detail::cuda_upload(const CudaContext&, void*, const void*, size_t) {
  throw Error("cannot copy to a CUDA device: oar was built without CUDA");
}
OAR_FUNC void detail::cuda_copy_from_pinned(const CudaContext&, void*, const void*, size_t, const void*) {
  throw Error("cannot copy to a CUDA device: oar was built without CUDA");
}
OAR_FUNC void detail::cuda_download_to_pinned(const CudaContext&, void*, const void*, size_t, const void*) {
  throw Error("cannot copy from a CUDA device: oar was built without CUDA");
}
OAR_FUNC Fence CudaContext::record_fence() const { throw Error("cannot record a fence: oar was built without CUDA"); }
// Without CUDA every fence is empty.
OAR_FUNC bool Fence::done() const { return true; }
OAR_FUNC void Fence::wait() const {}
#endif

OAR_FUNC bool DeviceContext::put_feed(LoDTensor& dst, const LoDTensor& src, bool) {
  dst.copy_from(src);
  return false;
}

OAR_FUNC bool DeviceContext::take_fetch(const LoDTensor& t, LoDTensor& out, bool) {
  out = t.place().is_cpu() ? t : LoDTensor(t.to(cpu()), t.lod());  // fetches come back to the host
  return false;
}

OAR_FUNC bool CudaContext::put_feed(LoDTensor& dst, const LoDTensor& t, bool queue) {
  // From pinned memory the copy is queued on this run's stream and the host goes on; the pinned allocator keeps
  // the block until it has run. For a run the host does not wait for (`queue`), other host memory is first
  // copied into a page-locked block (what the driver's own copy from pageable memory does, except that its copy
  // waits for every stream of the device, the runs queued before this one included): then the caller may write
  // `t` as soon as run() returns. A run the host waits for gains nothing by that and keeps the driver's copy,
  // the path every GPU session has run. Past kMaxQueuedHostCopy bytes, from other devices, and when no more
  // memory can be pinned, the copy is made before the run starts.
  Tensor staged;
  if (queue && !t.pinned() && t.place().is_cpu() && t.bytes() > 0 && t.bytes() <= detail::kMaxQueuedHostCopy) {
    staged = detail::try_page_locked(t.shape(), t.dtype());
    if (staged.initialized()) std::memcpy(staged.raw(), t.raw(), t.bytes());
  }
  if (t.pinned()) {
    detail::cuda_copy_from_pinned(*this, dst.raw(), t.raw(), t.bytes(), t.storage()->data());
    return true;
  }
  if (staged.initialized()) {
    detail::cuda_copy_from_pinned(*this, dst.raw(), staged.raw(), t.bytes(), staged.storage()->data());
    return true;
  }
  dst.copy_from(t);
  return false;
}

OAR_FUNC bool CudaContext::take_fetch(const LoDTensor& t, LoDTensor& out, bool queue) {
  if (!queue) return DeviceContext::take_fetch(t, out, false);
  Tensor host;
  if (t.place() == place() && t.bytes() <= detail::kMaxQueuedHostCopy) host = detail::try_page_locked(t.shape(), t.dtype());
  if (host.initialized()) {
    // Queued on the run's stream: the next run on the device, which may reuse the variable's buffer, follows it.
    detail::cuda_download_to_pinned(*this, host.raw(), t.raw(), t.bytes(), host.storage()->data());
    out = LoDTensor(std::move(host), t.lod());
    return true;
  }
  // A value the host computed: the next run, queued before this one's values are read, may write it at once.
  if (t.place().is_cpu()) out = LoDTensor(t.clone(), t.lod());
  else out = LoDTensor(t.to(cpu()), t.lod());
  return false;
}

OAR_FUNC std::shared_ptr<void> CudaContext::keep_graph(void* graph) const {
  return std::shared_ptr<void>(graph, [](void* g) { CudaContext::destroy_graph(g); });
}

OAR_FUNC std::unique_ptr<DeviceContext> make_device_context(Place place, uint64_t seed) {
  if (place.is_cpu()) return std::make_unique<CpuContext>(seed);
  return std::make_unique<CudaContext>(place.device, seed);
}

}  // namespace oar
