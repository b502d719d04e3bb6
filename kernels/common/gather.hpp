// kernels/common/gather.hpp: indices read on the host and checked against a range, for the kernels of every place
// that take an index tensor (gather, one_hot).
#pragma once
#include <cstdint>
#include <span>
#include <type_traits>

#include "kernels/common/scratch.hpp"
#include "oar/ops/gather.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// The indices of an i32/i64 tensor (input slot `what`) as int64, each checked against [0, rows); an
/// oar::Error names the first bad one as "<what>[i] = v" and the range as `range_of()`, called only then (a
/// good run formats nothing). i64 indices are the tensor's own memory; i32 ones are widened into a per-thread
/// buffer, valid until the next call on this thread.
template <class RangeOf>
std::span<const int64_t> checked_indices(const KernelContext& c, const Tensor& idx, int64_t rows, Slot what, RangeOf&& range_of) {
  const size_t n = size_t(idx.numel());
  auto check = [&](size_t i, int64_t v) {
    if (!(v >= 0 && v < rows)) [[unlikely]]
      c.fail("{}[{}] = {} is out of range [0, {}) ({})", what.name, i, v, rows, range_of());
  };
  const int64_t* out = nullptr;
  c.dispatch(type_list<int32_t, int64_t>{}, idx.dtype(), [&](auto tag) {
    using I = typename decltype(tag)::type;
    const I* p = idx.data<I>();
    if constexpr (std::is_same_v<I, int64_t>) {
      for (size_t i = 0; i < n; ++i) check(i, p[i]);
      out = p;
    } else {
      int64_t* wide = thread_scratch<int64_t, 50>(n);
      for (size_t i = 0; i < n; ++i) {
        check(i, int64_t(p[i]));
        wide[i] = int64_t(p[i]);
      }
      out = wide;
    }
  });
  return {out, n};
}

}  // namespace oar::kernels
