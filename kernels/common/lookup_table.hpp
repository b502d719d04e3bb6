// kernels/common/lookup_table.hpp: the padding row and the checked ids of lookup_table, read on the host by the
// kernels of every place.
#pragma once
#include <cstdint>
#include <span>

#include "oar/ops/lookup_table.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// padding_idx as a row of a table of `v` rows: -1 (none) stays -1, another negative p becomes v + p.
inline int64_t padding_row(int64_t p, int64_t v) { return p == -1 ? -1 : p < 0 ? v + p : p; }

/// The ids (the tensor's own memory), checked against [0, V) except the padding id.
inline std::span<const int64_t> lookup_ids(const KernelContext& c, const Tensor& ids, int64_t v, int64_t pad) {
  c.check(ids.dtype() == DType::i64, "Ids must be i64, got {}", name(ids.dtype()));
  std::span<const int64_t> out(ids.data<int64_t>(), size_t(ids.numel()));
  for (size_t i = 0; i < out.size(); ++i)
    c.check((out[i] >= 0 && out[i] < v) || out[i] == pad, "Ids[{}] = {} is out of range [0, {}) (the rows of W)", i, out[i], v);
  return out;
}

}  // namespace oar::kernels
