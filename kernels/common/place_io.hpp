// kernels/common/place_io.hpp: how a kernel that serves every place (`any_place`) touches tensor memory. The
// bytes it moves go through copy / zero, queued on the kernel's stream on a GPU (memcpy / memset on the CPU);
// the few values that decide what moves (an index, a rank table, a mask) are read through host, which on a GPU
// waits for the device (the decision is the host's, as a LoD is), and written through store or upload, which
// queue their copy on the kernel's stream without waiting. The CUDA kernels put their plans on the device the
// same way.
#pragma once
#include <cstring>
#include <span>

#include "oar/device/cuda.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels::place_io {

/// dst[0, bytes) = src[0, bytes), both in the memory of the kernel's place.
inline void copy(const KernelContext& c, void* dst, const void* src, size_t bytes) {
  if (!bytes || dst == src) return;
  if (c.place().is_cuda()) oar::detail::cuda_copy_rows(c.cuda(), dst, bytes, src, bytes, bytes, 1);
  else std::memcpy(dst, src, bytes);
}

/// dst[0, bytes) = 0 in the memory of the kernel's place.
inline void zero(const KernelContext& c, void* dst, size_t bytes) {
  if (!bytes) return;
  if (c.place().is_cuda()) oar::detail::cuda_zero(c.cuda(), dst, bytes);
  else std::memset(dst, 0, bytes);
}

/// `t`'s values where the host can read them: `t` itself on the CPU; from a device, a host copy made once the
/// work queued before it (which may write `t`) is done.
inline Tensor host(const KernelContext& c, const Tensor& t) {
  if (t.place().is_cpu()) return t;
  c.device().synchronize();
  return t.to(cpu());
}

/// t (already sized, on the kernel's place) = the host values `values` (t's bytes of them). On a GPU the copy is
/// queued on the kernel's stream (after the work that may still read t); `values` may go when it returns.
inline void store(const KernelContext& c, Tensor& t, const void* values) {
  if (!t.bytes()) return;
  if (t.place().is_cpu()) std::memcpy(t.raw(), values, t.bytes());
  else oar::detail::cuda_upload(c.cuda(), t.raw(), values, t.bytes());
}

/// The host values `v` as an int64 tensor on the kernel's place (an index plan a kernel reads).
inline Tensor upload(const KernelContext& c, std::span<const int64_t> v) {
  Tensor t(Shape{int64_t(v.size())}, DType::i64, c.place());
  store(c, t, v.data());
  return t;
}

}  // namespace oar::kernels::place_io
