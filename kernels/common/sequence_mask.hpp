// kernels/common/sequence_mask.hpp: the lengths (read on the host) and Y's size that sequence_mask's kernels
// on every place start from.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/common/place_io.hpp"
#include "oar/ops/sequence_mask.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// The dtypes Y is written in.
using mask_types = type_list<bool, uint8_t, int8_t, int16_t, int32_t, int64_t, float, double>;

/// What sequence_mask's kernels on every place start from: the lengths checked (>= 0, read on the host), and Y
/// resized to [X's dims..., maxlen] of out_dtype; returns maxlen (the attribute, or the largest length when it
/// is negative).
inline int64_t mask_plan(const KernelContext& c, const ops::SequenceMask::Attrs& a) {
  using Op = ops::SequenceMask;
  const LoDTensor& xt = c.in(Op::x);
  LoDTensor& yt = c.out(Op::y);
  c.check(&yt != &xt, "Y cannot be X");
  int64_t m = a.maxlen;
  c.dispatch(type_list<int64_t, int32_t>{}, xt.dtype(), [&](auto xtag) {
    using L = typename decltype(xtag)::type;
    const Tensor lengths = place_io::host(c, xt);
    const L* len = lengths.data<L>();
    const int64_t n = lengths.numel();
    for (int64_t i = 0; i < n; ++i) c.check(len[i] >= 0, "X ('{}') holds a negative length {} at {}", c.in_name(Op::x), int64_t(len[i]), i);
    if (m < 0) m = n == 0 ? 0 : int64_t(*std::max_element(len, len + n));
  });
  Shape ys = xt.shape();
  ys.insert(ys.rank(), m);
  c.dispatch(mask_types{}, a.out_dtype, [](auto) {});  // the dtypes both places write
  yt.resize(ys, a.out_dtype);
  return m;
}

}  // namespace oar::kernels
