// kernels/cpu/place_io.hpp: how a kernel that serves every place (`any_place`) touches tensor memory. The bytes
// it moves go through copy / zero, queued on the kernel's stream on a GPU (memcpy / memset on the CPU); the few
// values that decide what moves (an index, a rank table, a mask) are read through host and written through
// store. On a GPU those wait for the device (the decision is the host's, as a LoD is).
#pragma once
#include <cstring>

#include "oar/device/cuda.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::cpu_kernels::place_io {

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

/// t (already sized, on the kernel's place) = the host values `values` (t's bytes of them).
inline void store(const KernelContext& c, Tensor& t, const void* values) {
  if (!t.bytes()) return;
  if (t.place().is_cpu()) std::memcpy(t.raw(), values, t.bytes());
  else oar::detail::cuda_copy(t.raw(), t.place(), values, cpu(), t.bytes());
}

}  // namespace oar::cpu_kernels::place_io
