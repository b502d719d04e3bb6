// oar/device/cuda-inl.hpp: the implementation of cuda.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/device/cuda.hpp"

namespace oar {

// With CUDA, kernels/cuda/context.cpp defines these.
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

OAR_FUNC std::unique_ptr<DeviceContext> make_device_context(Place place, uint64_t seed) {
  if (place.is_cpu()) return std::make_unique<CpuContext>(seed);
  return std::make_unique<CudaContext>(place.device, seed);
}

}  // namespace oar
