// oar/device/cuda.hpp: what host code may ask of the CUDA backend: how many devices there are, the device
// context kernels run on (a stream and lazily created cuBLAS and cuDNN handles), and copies between places.
// Defined in kernels/cuda/context.cpp when oar is built with CUDA; without it there are no devices and asking
// for one is an oar::Error. No CUDA header is needed to include this one.
#pragma once
#include <cstddef>
#include <memory>

#include "oar/config.hpp"
#include "oar/core/error.hpp"
#include "oar/device/device_context.hpp"

struct CUstream_st;    // cudaStream_t
struct cublasContext;  // cublasHandle_t
struct cudnnContext;   // cudnnHandle_t

namespace oar {

/// Number of usable CUDA devices; 0 without a driver, without a GPU, or in a build without CUDA.
int cuda_device_count();

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

 private:
  int device_;
  CUstream_st* stream_ = nullptr;
  mutable cublasContext* cublas_ = nullptr;
  mutable cudnnContext* cudnn_ = nullptr;
};

namespace detail {
/// Copies `bytes` between any two places (host <-> device, device <-> device); waits for the copy, so the
/// source may be released and the destination read on the host right after.
void cuda_copy(void* dst, Place dst_place, const void* src, Place src_place, size_t bytes);
}  // namespace detail

#if !OAR_WITH_CUDA
inline int cuda_device_count() { return 0; }
inline CudaContext::CudaContext(int device, uint64_t seed) : DeviceContext(seed), device_(device) {
  throw Error(fmt::format("no CUDA device {}: oar was built without CUDA (configure with the CUDA toolkit present)", device));
}
inline CudaContext::~CudaContext() = default;
inline void CudaContext::synchronize() const {}
inline cublasContext* CudaContext::cublas() const { return nullptr; }
inline cudnnContext* CudaContext::cudnn() const { return nullptr; }
inline void detail::cuda_copy(void*, Place dst, const void*, Place src, size_t) {
  throw Error(fmt::format("cannot copy {} -> {}: oar was built without CUDA", src.str(), dst.str()));
}
#endif

/// The context kernels on `place` run with: a CpuContext, or a CudaContext for that device.
inline std::unique_ptr<DeviceContext> make_device_context(Place place, uint64_t seed = 0) {
  if (place.is_cpu()) return std::make_unique<CpuContext>(seed);
  return std::make_unique<CudaContext>(place.device, seed);
}

}  // namespace oar
