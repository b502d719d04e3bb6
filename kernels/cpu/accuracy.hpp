// kernels/cpu/accuracy.hpp: accuracy on the CPU (a serial count: one compare per index).
#pragma once
#include "oar/ops/accuracy.hpp"
#include "oar/runtime/kernel_context.hpp"

namespace oar::ops {

inline void Accuracy::eval_cpu(KernelContext& c) {
  const LoDTensor& ind = c.in("Indices");
  const LoDTensor& label = c.in("Label");
  c.check(ind.rank() == 2, "Indices must be [N, k], got {}", ind.shape());
  const int64_t n = ind.dim(0), k = ind.dim(1);
  c.check(label.numel() == n, "Label {} must hold one label per row of Indices {}", label.shape(), ind.shape());
  int64_t correct = 0;
  c.dispatch(type_list<int64_t, int32_t>{}, ind.dtype(), [&](auto it) {
    using I = typename decltype(it)::type;
    c.dispatch(type_list<int64_t, int32_t>{}, label.dtype(), [&](auto lt) {
      using L = typename decltype(lt)::type;
      const I* pi = ind.data<I>();
      const L* pl = label.data<L>();
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < k; ++j)
          if (int64_t(pi[i * k + j]) == int64_t(pl[i])) {
            ++correct;
            break;
          }
    });
  });
  LoDTensor& acc = c.out("Accuracy");
  LoDTensor& cor = c.out("Correct");
  LoDTensor& tot = c.out("Total");
  acc.resize(Shape{1}, DType::f32);
  cor.resize(Shape{1}, DType::i32);
  tot.resize(Shape{1}, DType::i32);
  acc.data<float>()[0] = n ? float(correct) / float(n) : 0.f;
  cor.data<int32_t>()[0] = int32_t(correct);
  tot.data<int32_t>()[0] = int32_t(n);
}

}  // namespace oar::ops
