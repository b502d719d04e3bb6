// kernels/cpu/accuracy.hpp: accuracy on the CPU (a serial count: one compare per index).
#pragma once
#include "kernels/common/accuracy.hpp"
#include "oar/ops/accuracy.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::ops {

inline void Accuracy::eval_cpu(KernelContext& c, const NoAttrs&) {
  const LoDTensor& ind = c.in(indices);
  const LoDTensor& lt = c.in(label);
  c.check(ind.rank() == 2, "Indices must be [N, k], got {}", ind.shape());
  const int64_t n = ind.dim(0), k = ind.dim(1);
  c.check(lt.numel() == n, "Label {} must hold one label per row of Indices {}", lt.shape(), ind.shape());
  int64_t hits = 0;
  c.dispatch(type_list<int64_t, int32_t>{}, ind.dtype(), [&](auto it) {
    using I = typename decltype(it)::type;
    c.dispatch(type_list<int64_t, int32_t>{}, lt.dtype(), [&](auto ltag) {
      using L = typename decltype(ltag)::type;
      const I* pi = ind.data<I>();
      const L* pl = lt.data<L>();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < k; ++j)
          if (int64_t(pi[i * k + j]) == int64_t(pl[i])) {
            ++hits;
            break;
          }
    });
  });
  const kernels::AccuracyOut o = kernels::accuracy_out(c);
  o.accuracy.data<float>()[0] = n ? float(hits) / float(n) : 0.f;
  o.correct.data<int32_t>()[0] = int32_t(hits);
  o.total.data<int32_t>()[0] = int32_t(n);
}

}  // namespace oar::ops
