// kernels/cpu/sequence_mask.hpp: sequence_mask on the CPU: one row of the mask per length.
#pragma once
#include <algorithm>

#include "kernels/cpu/place_io.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"
#include "oar/ops/sequence_mask.hpp"

namespace oar::cpu_kernels {

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

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void SequenceMask::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const int64_t m = cpu_kernels::mask_plan(c, a);
  LoDTensor& yt = c.out(y);
  c.dispatch(type_list<int64_t, int32_t>{}, xt.dtype(), [&](auto xtag) {
    using L = typename decltype(xtag)::type;
    const L* len = xt.data<L>();
    const int64_t n = xt.numel();
    c.dispatch(cpu_kernels::mask_types{}, a.out_dtype, [&](auto ytag) {
      using T = typename decltype(ytag)::type;
      T* py = yt.data<T>();
      parallel_for(0, n, std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(m, 1)), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          const int64_t k = std::min<int64_t>(int64_t(len[i]), m);
          std::fill(py + i * m, py + i * m + k, T(1));
          std::fill(py + i * m + k, py + (i + 1) * m, T(0));
        }
      });
    });
  });
  yt.set_lod(xt.lod());
}

}  // namespace oar::ops
