// kernels/cpu/lstm.hpp: lstm and lstm_grad on the CPU in Fluid's batch layout (kernels/cpu/rnn_batch.hpp):
// per time step one gemm h_{t-1} Weight for all active sequences and one fused pass over the step's rows for
// the gate math; the backward walks the steps in reverse and gets Weight@GRAD from one gemm over all rows.
#pragma once
#include "kernels/common/lstm.hpp"
#include "kernels/cpu/rnn_batch.hpp"
#include "kernels/cpu/scratch.hpp"
#include "oar/ops/lstm.hpp"

namespace oar::cpu_kernels::lstm {

using rnn::act_backward;
using rnn::act_forward;

/// Pointers of one lstm run; peepholes null without them.
template <class T>
struct Cell {
  int64_t d;
  RnnAct gate, cell, candidate;
  const T *w_ic = nullptr, *w_fc = nullptr, *w_oc = nullptr;
};

/// One row of the forward: g [4D] holds the gate inputs [a_c, a_i, a_f, a_o] (x + b + h_{t-1} W) and becomes
/// the activated [c~, i, f, o]; c_prev may be null (zeros). Writes c and h.
/// requires: no aliasing between g, c_prev, c, h.
template <class T>
inline void forward_row(const Cell<T>& p, T* __restrict g, const T* __restrict c_prev, T* __restrict c, T* __restrict h) {
  const int64_t d = p.d;
  T *gc = g, *gi = g + d, *gf = g + 2 * d, *go = g + 3 * d;
  if (c_prev && p.w_ic)
    for (int64_t j = 0; j < d; ++j) {
      gi[j] += c_prev[j] * p.w_ic[j];
      gf[j] += c_prev[j] * p.w_fc[j];
    }
  act_forward(p.candidate, gc, d);
  act_forward(p.gate, gi, 2 * d);  // i and f
  if (c_prev)
    for (int64_t j = 0; j < d; ++j) c[j] = gf[j] * c_prev[j] + gi[j] * gc[j];
  else
    for (int64_t j = 0; j < d; ++j) c[j] = gi[j] * gc[j];
  if (p.w_oc)
    for (int64_t j = 0; j < d; ++j) go[j] += c[j] * p.w_oc[j];
  act_forward(p.gate, go, d);
  std::memcpy(h, c, size_t(d) * sizeof(T));
  act_forward(p.cell, h, d);
  for (int64_t j = 0; j < d; ++j) h[j] *= go[j];
}

/// One row of the backward. g: the activated [c~, i, f, o]; c: c_t; c_prev may be null (zeros); dh: the
/// gradient of h_t; dc: the gradient of c_t reaching it from outside and from step t + 1. Writes dg [4D], the
/// gradient of the gate inputs, and (when dc_prev is not null) adds the gradient of c_{t-1} to dc_prev.
/// `ac` is scratch of D.
template <class T>
inline void backward_row(const Cell<T>& p, const T* __restrict g, const T* __restrict c, const T* __restrict c_prev, const T* __restrict dh,
                         const T* __restrict dc_in, T* __restrict dg, T* __restrict dc_prev, T* __restrict ac) {
  const int64_t d = p.d;
  const T *gc = g, *gi = g + d, *gf = g + 2 * d, *go = g + 3 * d;
  T *dgc = dg, *dgi = dg + d, *dgf = dg + 2 * d, *dgo = dg + 3 * d;
  std::memcpy(ac, c, size_t(d) * sizeof(T));
  act_forward(p.cell, ac, d);
  // do = dh * cell_act(c); the cell's own gradient from h: dh * o * cell_act'(c), kept in dgc for now.
  for (int64_t j = 0; j < d; ++j) {
    dgo[j] = dh[j] * ac[j];
    dgc[j] = dh[j] * go[j];
  }
  act_backward(p.gate, go, dgo, d);
  act_backward(p.cell, ac, dgc, d);
  // dgc = dc, the total gradient of c_t.
  if (p.w_oc)
    for (int64_t j = 0; j < d; ++j) dgc[j] += dc_in[j] + dgo[j] * p.w_oc[j];
  else
    for (int64_t j = 0; j < d; ++j) dgc[j] += dc_in[j];
  for (int64_t j = 0; j < d; ++j) {
    dgi[j] = dgc[j] * gc[j];
    dgf[j] = c_prev ? dgc[j] * c_prev[j] : T(0);
  }
  if (dc_prev) {
    for (int64_t j = 0; j < d; ++j) dc_prev[j] += dgc[j] * gf[j];
  }
  for (int64_t j = 0; j < d; ++j) dgc[j] *= gi[j];
  act_backward(p.candidate, gc, dgc, d);
  act_backward(p.gate, gi, dgi, 2 * d);  // i and f
  if (dc_prev && p.w_ic)
    for (int64_t j = 0; j < d; ++j) dc_prev[j] += dgi[j] * p.w_ic[j] + dgf[j] * p.w_fc[j];
}

using namespace kernels::lstm;

}  // namespace oar::cpu_kernels::lstm

namespace oar::ops {

inline void Lstm::eval_cpu(KernelContext& c, const Attrs& a) {
  using namespace cpu_kernels;
  const lstm::ForwardArgs f = lstm::forward_args(c, a);
  const LoDTensor &x = f.x, &w = f.w;
  const LoDTensor *b = f.b, *h0t = f.h0, *c0t = f.c0;
  const int64_t d = f.d, rows = f.rows;
  const rnn::BatchLayout& l = f.l;
  auto [hid, cel, gate, cpa] = lstm::outputs(c, f);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pw = w.data<T>();
    const T* pb = b ? b->data<T>() : nullptr;
    T* g = gate.data<T>();
    T* cb = cpa.data<T>();
    T* hb = thread_scratch<T, 80>(size_t(rows * d));  // h in the batch layout: the next step's gemm operand
    T* hs = hid.data<T>();
    T* cs = cel.data<T>();
    lstm::Cell<T> p{d, a.gate, a.cell, a.candidate};
    if (a.use_peepholes) p.w_ic = pb + 4 * d, p.w_fc = pb + 5 * d, p.w_oc = pb + 6 * d;
    // Gate inputs in the batch layout: x + b.
    const T* px = x.data<T>();
    parallel_for(0, rows, rnn::row_grain(4 * d), [&](int64_t lo, int64_t hi) {
      for (int64_t r = lo; r < hi; ++r) {
        T* gr = g + r * 4 * d;
        const T* xr = px + l.row_of[r] * 4 * d;
        if (pb) for (int64_t j = 0; j < 4 * d; ++j) gr[j] = xr[j] + pb[j];
        else std::memcpy(gr, xr, size_t(4 * d) * sizeof(T));
      }
    });
    // The initial states in the sorted order.
    const int64_t k0 = l.steps > 0 ? l.active(0) : 0;
    // Weight packed once for the steps' products (kernels/cpu/gemm.hpp says where that pays).
    T* wp = packed::preferred && l.steps > 1 ? thread_scratch<T, 89>(packed_rhs_size<T>(d, 4 * d)) : nullptr;
    if (wp) pack_rhs<T>(false, pw, 4 * d, d, 4 * d, wp);
    T* h0s = h0t ? thread_scratch<T, 81>(size_t(k0 * d)) : nullptr;
    T* c0s = c0t ? thread_scratch<T, 82>(size_t(k0 * d)) : nullptr;
    if (h0s) rnn::gather_rows(h0s, h0t->data<T>(), l.order, k0, d);
    if (c0s) rnn::gather_rows(c0s, c0t->data<T>(), l.order, k0, d);
    for (int64_t t = 0; t < l.steps; ++t) {
      const int64_t b0 = l.step_begin[t], k = l.active(t);
      const T* hp = t == 0 ? h0s : hb + l.step_begin[t - 1] * d;
      const T* cp = t == 0 ? c0s : cb + l.step_begin[t - 1] * d;
      if (hp && wp) gemm_packed<T>(k, 4 * d, d, hp, d, wp, g + b0 * 4 * d, 4 * d);
      else if (hp) gemm<T>(false, false, k, 4 * d, d, T(1), hp, d, pw, 4 * d, T(1), g + b0 * 4 * d, 4 * d);
      parallel_for(0, k, rnn::row_grain(8 * d), [&](int64_t lo, int64_t hi) {
        for (int64_t i = lo; i < hi; ++i) {
          const int64_t r = b0 + i;
          lstm::forward_row(p, g + r * 4 * d, cp ? cp + i * d : nullptr, cb + r * d, hb + r * d);
          std::memcpy(hs + l.row_of[r] * d, hb + r * d, size_t(d) * sizeof(T));
          std::memcpy(cs + l.row_of[r] * d, cb + r * d, size_t(d) * sizeof(T));
        }
      });
    }
  });
  hid.set_lod(x.lod());
  cel.set_lod(x.lod());
}

inline void Lstm::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  using namespace cpu_kernels;
  const lstm::GradArgs ga = lstm::grad_args(c, a);
  const LoDTensor &w = ga.w, &hid = ga.hid, &gate = ga.gate, &cpa = ga.cpa, &dhid = ga.dhid;
  const LoDTensor *dcel = ga.dcel, *b = ga.b, *h0t = ga.h0, *c0t = ga.c0;
  LoDTensor *dx = ga.dx, *dw = ga.dw, *db = ga.db, *dh0 = ga.dh0, *dc0 = ga.dc0;
  const int64_t d = ga.d, rows = ga.rows;
  const rnn::BatchLayout& l = ga.l;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pw = w.data<T>();
    const T* pb = b ? b->data<T>() : nullptr;
    const T* g = gate.data<T>();
    const T* cb = cpa.data<T>();
    lstm::Cell<T> p{d, a.gate, a.cell, a.candidate};
    if (a.use_peepholes) p.w_ic = pb + 4 * d, p.w_fc = pb + 5 * d, p.w_oc = pb + 6 * d;
    const int64_t k0 = l.steps > 0 ? l.active(0) : 0;
    // Gradients of h and c in the batch layout: the outputs' own, plus what step t + 1 adds.
    T* dhb = thread_scratch<T, 83>(size_t(rows * d));
    T* dcb = thread_scratch<T, 84>(size_t(rows * d));
    T* dg = thread_scratch<T, 85>(size_t(rows * 4 * d));
    rnn::gather_rows(dhb, dhid.data<T>(), l.row_of, rows, d);
    if (dcel) rnn::gather_rows(dcb, dcel->data<T>(), l.row_of, rows, d);
    else std::fill(dcb, dcb + rows * d, T(0));
    // c_{-1} and the gradients reaching h_{-1}, c_{-1} in the sorted order.
    T* c0s = c0t ? thread_scratch<T, 82>(size_t(k0 * d)) : nullptr;
    if (c0s) rnn::gather_rows(c0s, c0t->data<T>(), l.order, k0, d);
    T* dh0s = dh0 ? thread_scratch<T, 86>(size_t(k0 * d)) : nullptr;
    T* dc0s = dc0 ? thread_scratch<T, 87>(size_t(k0 * d)) : nullptr;
    if (dc0s) std::fill(dc0s, dc0s + k0 * d, T(0));
    // Weight^T packed once for the steps' products dh_{t-1} += dg Weight^T.
    T* wtp = packed::preferred && l.steps > 1 ? thread_scratch<T, 89>(packed_rhs_size<T>(4 * d, d)) : nullptr;
    if (wtp) pack_rhs<T>(true, pw, 4 * d, 4 * d, d, wtp);
    for (int64_t t = l.steps - 1; t >= 0; --t) {
      const int64_t b0 = l.step_begin[t], k = l.active(t);
      const T* cp = t == 0 ? c0s : cb + l.step_begin[t - 1] * d;
      T* dcp = t == 0 ? dc0s : dcb + l.step_begin[t - 1] * d;
      parallel_for(0, k, rnn::row_grain(8 * d), [&](int64_t lo, int64_t hi) {
        T* ac = thread_scratch<T, 88>(size_t(d));
        for (int64_t i = lo; i < hi; ++i) {
          const int64_t r = b0 + i;
          lstm::backward_row(p, g + r * 4 * d, cb + r * d, cp ? cp + i * d : nullptr, dhb + r * d, dcb + r * d, dg + r * 4 * d,
                             dcp ? dcp + i * d : nullptr, ac);
        }
      });
      // dh_{t-1} += dg Weight^T
      T* dhp = t > 0 ? dhb + l.step_begin[t - 1] * d : dh0s;
      if (t == 0 && dh0s) std::fill(dh0s, dh0s + k * d, T(0));
      if (dhp && wtp) gemm_packed<T>(k, d, 4 * d, dg + b0 * 4 * d, 4 * d, wtp, dhp, d);
      else if (dhp) gemm<T>(false, true, k, d, 4 * d, T(1), dg + b0 * 4 * d, 4 * d, pw, 4 * d, T(1), dhp, d);
    }
    if (dx) {
      dx->resize(Shape{rows, 4 * d}, hid.dtype());
      rnn::scatter_rows(dx->data<T>(), dg, l.row_of, rows, 4 * d);
      dx->set_lod(hid.lod());
    }
    if (dw) {
      // Weight@GRAD = sum over rows of h_{t-1}^T dg: one gemm over h_{t-1} of every row, gathered in the batch
      // layout (rows of step 0 only with H0: without it they add nothing).
      dw->resize(w.shape(), w.dtype());
      const int64_t from = h0t ? 0 : k0;
      T* hp = rnn::previous_hidden(l, hid.data<T>(), h0t ? h0t->data<T>() : nullptr, d, thread_scratch<T, 80>(size_t(rows * d)));
      gemm<T>(true, false, d, 4 * d, rows - from, T(1), hp + from * d, d, dg + from * 4 * d, 4 * d, T(0), dw->data<T>(), 4 * d);
    }
    if (db) {
      db->resize(b->shape(), b->dtype());
      T* pdb = db->data<T>();
      rnn::column_sums(dg, rows, 4 * d, 4 * d, pdb, false);
      if (a.use_peepholes) {
        // dW_ic = sum dg_i * c_{t-1}, dW_fc = sum dg_f * c_{t-1}, dW_oc = sum dg_o * c_t.
        T *dic = pdb + 4 * d, *dfc = pdb + 5 * d, *doc = pdb + 6 * d;
        std::fill(dic, dic + 3 * d, T(0));
        for (int64_t t = 0; t < l.steps; ++t)
          for (int64_t i = 0, k = l.active(t); i < k; ++i) {
            const int64_t r = l.step_begin[t] + i;
            const T* gr = dg + r * 4 * d;
            const T* cr = cb + r * d;
            const T* cp = t == 0 ? (c0s ? c0s + i * d : nullptr) : cb + (l.step_begin[t - 1] + i) * d;
            for (int64_t j = 0; j < d; ++j) doc[j] += gr[3 * d + j] * cr[j];
            if (cp)
              for (int64_t j = 0; j < d; ++j) {
                dic[j] += gr[d + j] * cp[j];
                dfc[j] += gr[2 * d + j] * cp[j];
              }
          }
      }
    }
    if (dh0) rnn::unsort_initial(l, dh0s, dh0, d, h0t->dtype());
    if (dc0) rnn::unsort_initial(l, dc0s, dc0, d, c0t->dtype());
  });
}

}  // namespace oar::ops
