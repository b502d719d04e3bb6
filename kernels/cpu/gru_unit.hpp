// kernels/cpu/gru_unit.hpp: gru_unit and gru_unit_grad on the CPU: one step of gru's kernels
// (kernels/cpu/gru.hpp) with every row active.
#pragma once
#include "kernels/common/gru_unit.hpp"
#include "kernels/cpu/gru.hpp"
#include "kernels/cpu/scratch.hpp"
#include "oar/ops/gru_unit.hpp"

namespace oar::cpu_kernels::gru_unit {

using namespace kernels::gru_unit;

}  // namespace oar::cpu_kernels::gru_unit

namespace oar::ops {

inline void GruUnit::eval_cpu(KernelContext& c, const Attrs& a) {
  using namespace cpu_kernels;
  const gru_unit::ForwardArgs f = gru_unit::forward_args(c);
  const LoDTensor &x = f.x, &hp = f.hp, &w = f.w;
  const LoDTensor* b = f.b;
  const int64_t d = f.d, n = f.n;
  auto [gt, rt, ht] = gru_unit::outputs(c, f);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    T* g = gt.data<T>();
    gru::gate_inputs(g, x.data<T>(), b ? b->data<T>() : nullptr, nullptr, n, 3 * d);
    const gru::Cell<T> p(d, a.gate, a.candidate, w.data<T>());
    gru::forward_step<T>(p, n, g, hp.data<T>(), rt.data<T>(), ht.data<T>(), nullptr, nullptr);
  });
}

inline void GruUnit::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  using namespace cpu_kernels;
  const gru_unit::GradArgs ga = gru_unit::grad_args(c);
  const LoDTensor &hp = ga.hp, &w = ga.w, &gt = ga.gate, &rt = ga.rh, &dh = ga.dh;
  const int64_t d = ga.d, n = ga.n;
  LoDTensor *dx = ga.dx, *dhp = ga.dhp, *dw = ga.dw, *db = ga.db;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dg;
    if (dx) {
      dx->resize(Shape{n, 3 * d}, hp.dtype());
      dg = dx->data<T>();
    } else {
      dg = thread_scratch<T, 85>(size_t(n * 3 * d));
    }
    T* dhpp = nullptr;
    if (dhp) {
      dhp->resize(hp.shape(), hp.dtype());
      dhpp = dhp->data<T>();
      std::fill(dhpp, dhpp + n * d, T(0));
    }
    const gru::Cell<T> p(d, a.gate, a.candidate, w.data<T>());
    gru::backward_step<T>(p, n, gt.data<T>(), hp.data<T>(), dh.data<T>(), dhpp, dg, thread_scratch<T, 84>(size_t(n * d)));
    if (dw) {
      dw->resize(w.shape(), w.dtype());
      gru::weight_grad<T>(d, n, hp.data<T>(), rt.data<T>(), dg, dw->data<T>());
    }
    if (db) {
      db->resize(Shape{1, 3 * d}, hp.dtype());
      rnn::column_sums(dg, n, 3 * d, 3 * d, db->data<T>(), false);
    }
  });
}

}  // namespace oar::ops
