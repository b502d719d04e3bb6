// kernels/cpu/lstm_unit.hpp: lstm_unit and lstm_unit_grad on the CPU: one pass over the rows, split over
// the thread pool, each element through kernels/rnn_math.hpp's formulas; the grad recomputes the gates from X.
#pragma once
#include <utility>

#include "kernels/common/lstm_unit.hpp"
#include "kernels/cpu/rnn_batch.hpp"
#include "kernels/rnn_math.hpp"
#include "oar/ops/lstm_unit.hpp"

namespace oar::ops {

inline void LstmUnit::eval_cpu(KernelContext& ctx, const Attrs& a) {
  using namespace cpu_kernels;
  const kernels::lstm_unit::ForwardArgs f = kernels::lstm_unit::forward_args(ctx);
  const LoDTensor &xt = f.x, &cp = f.c_prev;
  LoDTensor &ct = f.c, &ht = f.h;
  const int64_t n = f.n, d = f.d;
  ctx.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = xt.data<T>(), *pc = cp.data<T>();
    T *oc = ct.data<T>(), *oh = ht.data<T>();
    const T fb = T(a.forget_bias);
    parallel_for(0, n, rnn::row_grain(6 * d), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const T *xr = px + r * 4 * d, *cr = pc + r * d;
        T *cr_out = oc + r * d, *hr = oh + r * d;
        for (int64_t j = 0; j < d; ++j) fn::rnn::lstm_unit_forward(xr, d, j, fb, cr[j], cr_out[j], hr[j]);
      }
    });
  });
}

inline void LstmUnit::eval_grad_cpu(KernelContext& ctx, const Attrs& a) {
  using namespace cpu_kernels;
  const kernels::lstm_unit::GradArgs ga = kernels::lstm_unit::grad_args(ctx);
  const int64_t n = ga.n, d = ga.d;
  ctx.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = ga.x.data<T>(), *pc = ga.c_prev.data<T>(), *pcn = ga.c.data<T>(), *pdc = ga.dc.data<T>(), *pdh = ga.dh.data<T>();
    T* odx = ga.dx ? ga.dx->data<T>() : nullptr;
    T* odc = ga.dc_prev ? ga.dc_prev->data<T>() : nullptr;
    const T fb = T(a.forget_bias);
    parallel_for(0, n, rnn::row_grain(8 * d), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        const T *xr = px + r * 4 * d, *cr = pc + r * d, *cn = pcn + r * d, *dcr = pdc + r * d, *dhr = pdh + r * d;
        T* dxr = odx ? odx + r * 4 * d : nullptr;
        for (int64_t j = 0; j < d; ++j) {
          const T dc = fn::rnn::lstm_unit_backward(xr, d, j, fb, cr[j], cn[j], dcr[j], dhr[j], dxr);
          if (odc) odc[r * d + j] = dc;
        }
      }
    });
  });
}

}  // namespace oar::ops
