// kernels/cpu/gru.hpp: gru and gru_grad on the CPU in Fluid's batch layout (kernels/cpu/rnn_batch.hpp): per
// time step two gemms for all active sequences (h_{t-1} W_ur, then (r * h_{t-1}) W_c, which needs r first)
// and fused passes over the step's rows; the backward walks the steps in reverse and gets Weight@GRAD from
// two gemms over all rows. The step functions serve gru_unit too (kernels/cpu/gru_unit.hpp).
#pragma once
#include "kernels/common/gru.hpp"
#include "kernels/cpu/rnn_batch.hpp"
#include "kernels/cpu/scratch.hpp"
#include "oar/ops/gru.hpp"

namespace oar::cpu_kernels::gru {

using rnn::act_backward;
using rnn::act_forward;

/// The weights and activations of one run: W_ur [D, 2D] and W_c [D, D] (Fluid's storage of Weight [D, 3D]).
template <class T>
struct Cell {
  int64_t d;
  RnnAct gate, candidate;
  const T* w_ur;
  const T* w_c;
  Cell(int64_t dim, RnnAct g, RnnAct c, const T* w) : d(dim), gate(g), candidate(c), w_ur(w), w_c(w + 2 * dim * dim) {}
};

/// The forward of k rows of one step. g [k, 3D] holds x + b and becomes the activated [u, r, c]; hp [k, D]
/// is h_{t-1} (null: zeros). Writes rh = r * h_{t-1} and h [k, D], and h's rows to hs[row_of[i]] when hs is
/// given. requires: g, rh, h, hs do not overlap hp.
template <class T>
void forward_step(const Cell<T>& p, int64_t k, T* g, const T* hp, T* rh, T* h, const int64_t* row_of, T* hs) {
  const int64_t d = p.d;
  if (hp) gemm<T>(false, false, k, 2 * d, d, T(1), hp, d, p.w_ur, 2 * d, T(1), g, 3 * d);
  parallel_for(0, k, rnn::row_grain(3 * d), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      T* gi = g + i * 3 * d;
      act_forward(p.gate, gi, 2 * d);
      T* rhi = rh + i * d;
      if (hp) {
        const T *r = gi + d, *hpi = hp + i * d;
        for (int64_t j = 0; j < d; ++j) rhi[j] = r[j] * hpi[j];
      } else {
        std::fill(rhi, rhi + d, T(0));
      }
    }
  });
  if (hp) gemm<T>(false, false, k, d, d, T(1), rh, d, p.w_c, d, T(1), g + 2 * d, 3 * d);
  parallel_for(0, k, rnn::row_grain(3 * d), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      T* gi = g + i * 3 * d;
      T* c = gi + 2 * d;
      act_forward(p.candidate, c, d);
      const T* u = gi;
      T* hi_ = h + i * d;
      if (hp) {
        const T* hpi = hp + i * d;
        for (int64_t j = 0; j < d; ++j) hi_[j] = hpi[j] + u[j] * (c[j] - hpi[j]);
      } else {
        for (int64_t j = 0; j < d; ++j) hi_[j] = u[j] * c[j];
      }
      if (hs) std::memcpy(hs + row_of[i] * d, hi_, size_t(d) * sizeof(T));
    }
  });
}

/// The backward of k rows of one step. g: the activated [u, r, c]; hp: h_{t-1} (null: zeros); dh: the
/// gradient of h_t. Writes dg [k, 3D], the gradients of the gate inputs, and adds the gradient of h_{t-1} to
/// dhp when given. `drh` is scratch of [k, D].
template <class T>
void backward_step(const Cell<T>& p, int64_t k, const T* g, const T* hp, const T* dh, T* dhp, T* dg, T* drh) {
  const int64_t d = p.d;
  parallel_for(0, k, rnn::row_grain(3 * d), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const T *u = g + i * 3 * d, *c = u + 2 * d, *dhi = dh + i * d;
      T *dgu = dg + i * 3 * d, *dgr = dgu + d, *dgc = dgu + 2 * d;
      for (int64_t j = 0; j < d; ++j) dgc[j] = dhi[j] * u[j];
      if (hp) {
        const T* hpi = hp + i * d;
        for (int64_t j = 0; j < d; ++j) dgu[j] = dhi[j] * (c[j] - hpi[j]);
      } else {
        for (int64_t j = 0; j < d; ++j) dgu[j] = dhi[j] * c[j];
      }
      act_backward(p.candidate, c, dgc, d);
      act_backward(p.gate, u, dgu, d);
      if (dhp) {
        T* dhpi = dhp + i * d;
        for (int64_t j = 0; j < d; ++j) dhpi[j] += dhi[j] * (T(1) - u[j]);
      }
      if (!hp) std::fill(dgr, dgr + d, T(0));  // r met only zeros
    }
  });
  if (!hp) return;
  // d(r * h_{t-1}) = dg_c W_c^T
  gemm<T>(false, true, k, d, d, T(1), dg + 2 * d, 3 * d, p.w_c, d, T(0), drh, d);
  parallel_for(0, k, rnn::row_grain(3 * d), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const T *r = g + i * 3 * d + d, *hpi = hp + i * d, *drhi = drh + i * d;
      T* dgr = dg + i * 3 * d + d;
      for (int64_t j = 0; j < d; ++j) dgr[j] = drhi[j] * hpi[j];
      act_backward(p.gate, r, dgr, d);
      if (dhp) {
        T* dhpi = dhp + i * d;
        for (int64_t j = 0; j < d; ++j) dhpi[j] += drhi[j] * r[j];
      }
    }
  });
  // dh_{t-1} += [dg_u, dg_r] W_ur^T
  if (dhp) gemm<T>(false, true, k, d, 2 * d, T(1), dg, 3 * d, p.w_ur, 2 * d, T(1), dhp, d);
}

/// Weight@GRAD [D, 3D] (Fluid's storage) from rows [0, n) of h_{t-1} (hp), r * h_{t-1} (rh) and dg.
template <class T>
void weight_grad(int64_t d, int64_t n, const T* hp, const T* rh, const T* dg, T* dw) {
  gemm<T>(true, false, d, 2 * d, n, T(1), hp, d, dg, 3 * d, T(0), dw, 2 * d);
  gemm<T>(true, false, d, d, n, T(1), rh, d, dg + 2 * d, 3 * d, T(0), dw + 2 * d * d, d);
}

/// g[r] = x[row_of[r]] (or x[r] without row_of) + b (b may be null), rows of 3D.
template <class T>
void gate_inputs(T* g, const T* x, const T* b, const int64_t* row_of, int64_t rows, int64_t width) {
  parallel_for(0, rows, rnn::row_grain(width), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) {
      T* gr = g + r * width;
      const T* xr = x + (row_of ? row_of[r] : r) * width;
      if (b) for (int64_t j = 0; j < width; ++j) gr[j] = xr[j] + b[j];
      else std::memcpy(gr, xr, size_t(width) * sizeof(T));
    }
  });
}

using namespace kernels::gru;

}  // namespace oar::cpu_kernels::gru

namespace oar::ops {

inline void Gru::eval_cpu(KernelContext& c, const Attrs& a) {
  using namespace cpu_kernels;
  const gru::ForwardArgs f = gru::forward_args(c, a);
  const LoDTensor &x = f.x, &w = f.w;
  const LoDTensor *b = f.b, *h0t = f.h0;
  const int64_t d = f.d, rows = f.rows;
  const rnn::BatchLayout& l = f.l;
  auto [hid, gate, rhp, bh] = gru::outputs(c, f);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    T *g = gate.data<T>(), *rh = rhp.data<T>(), *hb = bh.data<T>(), *hs = hid.data<T>();
    gru::gate_inputs(g, x.data<T>(), b ? b->data<T>() : nullptr, l.row_of, rows, 3 * d);
    const int64_t k0 = l.steps > 0 ? l.active(0) : 0;
    T* h0s = h0t ? thread_scratch<T, 81>(size_t(k0 * d)) : nullptr;
    if (h0s) rnn::gather_rows(h0s, h0t->data<T>(), l.order, k0, d);
    const gru::Cell<T> p(d, a.gate, a.candidate, w.data<T>());
    for (int64_t t = 0; t < l.steps; ++t) {
      const int64_t b0 = l.step_begin[t];
      const T* hp = t == 0 ? h0s : hb + l.step_begin[t - 1] * d;
      gru::forward_step(p, l.active(t), g + b0 * 3 * d, hp, rh + b0 * d, hb + b0 * d, l.row_of + b0, hs);
    }
  });
  hid.set_lod(x.lod());
}

inline void Gru::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  using namespace cpu_kernels;
  const gru::GradArgs ga = gru::grad_args(c, a);
  const LoDTensor &w = ga.w, &hid = ga.hid, &gate = ga.gate, &rhp = ga.rhp, &bh = ga.bh, &dhid = ga.dhid;
  const LoDTensor* h0t = ga.h0;
  LoDTensor *dx = ga.dx, *dw = ga.dw, *db = ga.db, *dh0 = ga.dh0;
  const int64_t d = ga.d, rows = ga.rows;
  const rnn::BatchLayout& l = ga.l;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *g = gate.data<T>(), *rh = rhp.data<T>(), *hb = bh.data<T>();
    const gru::Cell<T> p(d, a.gate, a.candidate, w.data<T>());
    const int64_t k0 = l.steps > 0 ? l.active(0) : 0;
    T* dhb = thread_scratch<T, 83>(size_t(rows * d));
    T* dg = thread_scratch<T, 85>(size_t(rows * 3 * d));
    T* drh = thread_scratch<T, 84>(size_t(k0 * d));
    rnn::gather_rows(dhb, dhid.data<T>(), l.row_of, rows, d);
    T* h0s = h0t ? thread_scratch<T, 81>(size_t(k0 * d)) : nullptr;
    if (h0s) rnn::gather_rows(h0s, h0t->data<T>(), l.order, k0, d);
    T* dh0s = dh0 ? thread_scratch<T, 86>(size_t(k0 * d)) : nullptr;
    if (dh0s) std::fill(dh0s, dh0s + k0 * d, T(0));
    for (int64_t t = l.steps - 1; t >= 0; --t) {
      const int64_t b0 = l.step_begin[t];
      const T* hp = t == 0 ? h0s : hb + l.step_begin[t - 1] * d;
      T* dhp = t == 0 ? dh0s : dhb + l.step_begin[t - 1] * d;
      gru::backward_step(p, l.active(t), g + b0 * 3 * d, hp, dhb + b0 * d, dhp, dg + b0 * 3 * d, drh);
    }
    if (dx) {
      dx->resize(Shape{rows, 3 * d}, hid.dtype());
      rnn::scatter_rows(dx->data<T>(), dg, l.row_of, rows, 3 * d);
      dx->set_lod(hid.lod());
    }
    if (dw) {
      dw->resize(w.shape(), w.dtype());
      const int64_t from = h0t ? 0 : k0;  // without H0, step 0 adds nothing
      T* hp = rnn::previous_hidden(l, hid.data<T>(), h0t ? h0t->data<T>() : nullptr, d, thread_scratch<T, 80>(size_t(rows * d)));
      gru::weight_grad(d, rows - from, hp + from * d, rh + from * d, dg + from * 3 * d, dw->data<T>());
    }
    if (db) {
      db->resize(Shape{1, 3 * d}, hid.dtype());
      rnn::column_sums(dg, rows, 3 * d, 3 * d, db->data<T>(), false);
    }
    if (dh0) rnn::unsort_initial(l, dh0s, dh0, d, h0t->dtype());
  });
}

}  // namespace oar::ops
