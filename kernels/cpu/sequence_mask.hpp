// kernels/cpu/sequence_mask.hpp: sequence_mask on the CPU: one row of the mask per length.
#pragma once
#include <algorithm>

#include "kernels/common/sequence_mask.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"
#include "oar/ops/sequence_mask.hpp"

namespace oar::ops {

inline void SequenceMask::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const int64_t m = kernels::mask_plan(c, a);
  LoDTensor& yt = c.out(y);
  c.dispatch(type_list<int64_t, int32_t>{}, xt.dtype(), [&](auto xtag) {
    using L = typename decltype(xtag)::type;
    const L* len = xt.data<L>();
    const int64_t n = xt.numel();
    c.dispatch(kernels::mask_types{}, a.out_dtype, [&](auto ytag) {
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
