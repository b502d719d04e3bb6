// kernels/cuda/rnn.hpp: eval_cuda of lstm, gru, lstm_unit and gru_unit and their gradients (device side:
// kernels/cuda/rnn.cu). Each runs its CPU kernel's prologue (kernels/common: the same checks and messages) and its steps: the
// batch layout is made on the host from the LoD as the CPU makes it and its index arrays uploaded once per call;
// per time step the products with the weights run on cuBLAS, the gate math in one kernel over the step's rows
// (gru: two, as r must come before (r * h_{t-1}) W_c). Outputs and intermediates hold what the CPU writes there.
#pragma once
#include <algorithm>
#include <vector>

#include "kernels/common/gru.hpp"
#include "kernels/common/gru_unit.hpp"
#include "kernels/common/lstm.hpp"
#include "kernels/common/lstm_unit.hpp"
#include "kernels/common/place_io.hpp"
#include "kernels/cuda/elementwise_launch.hpp"
#include "kernels/cuda/host.hpp"
#include "kernels/cuda/rnn_launch.hpp"
#include "kernels/cuda/sequence_shape_launch.hpp"

namespace oar::cuda_kernels::rnn {

/// A device array of n elements of T (at least one: an empty batch still gets a valid pointer), freed in
/// stream order.
template <class T>
Tensor buffer(const KernelContext& c, int64_t n) {
  return Tensor(Shape{std::max<int64_t>(n, 1)}, dtype_of<T>, c.place());
}

/// The index arrays of a batch layout on the device, one upload: row_of [T] and order [S]; with `grad` also
/// init_src [S] (i for i < k_0, else -1: copy_rows then writes an initial state's gradient, zeros for the
/// sequences missing from step 0), prev [T] (the batch row of row r's previous step; 0 in step 0) and prev_seq
/// [T] (that row in the sequence layout).
struct DeviceLayout {
  Tensor plan;
  const int64_t *row_of = nullptr, *order = nullptr, *init_src = nullptr, *prev = nullptr, *prev_seq = nullptr;
  int64_t k0 = 0;
};
inline DeviceLayout upload_layout(const KernelContext& c, const kernels::rnn::BatchLayout& l, bool grad) {
  const int64_t T = l.rows, S = l.seqs;
  std::vector<int64_t> v(l.row_of, l.row_of + T);
  v.insert(v.end(), l.order, l.order + S);
  DeviceLayout d;
  d.k0 = l.steps > 0 ? l.active(0) : 0;
  if (grad) {
    for (int64_t i = 0; i < S; ++i) v.push_back(i < d.k0 ? i : -1);
    const size_t prev_at = v.size();
    v.resize(prev_at + size_t(2 * T), 0);
    for (int64_t t = 1; t < l.steps; ++t)
      for (int64_t r = l.step_begin[t]; r < l.step_begin[t + 1]; ++r) {
        const int64_t p = l.prev_row(t, r);
        v[prev_at + size_t(r)] = p;
        v[prev_at + size_t(T + r)] = l.row_of[p];
      }
  }
  if (v.empty()) v.push_back(0);
  d.plan = kernels::place_io::upload(c, v);
  const int64_t* p = d.plan.data<int64_t>();
  d.row_of = p, d.order = p + T;
  if (grad) d.init_src = p + T + S, d.prev = p + T + 2 * S, d.prev_seq = p + 2 * T + 2 * S;
  return d;
}

/// out row i = x row (src ? src[i] : i) for `rows` rows of D elements of T (sequence_shape.cu's copy_rows); src
/// entries < 0 write zeros; dst (may be null) places row i at out row dst[i].
template <class T>
void copy_rows(const KernelContext& c, const T* x, const int64_t* src, T* out, const int64_t* dst, int64_t rows, int64_t d) {
  check(c, cuda_kernels::copy_rows(int(sizeof(T)), x, src, out, dst, rows, d, nullptr, 0, stream(c)));
}
template <class T>
void zeros(const KernelContext& c, T* out, int64_t n) {
  check(c, fill(out, n, int(sizeof(T)), 0, stream(c)));
}

/// out [1, width] or Bias's shape = the column sums of m [rows, width] (Bias@GRAD).
template <class T>
void column_sums(const KernelContext& c, const T* m, int64_t rows, int64_t width, T* out) {
  Tensor ws = workspace(c, channel_scratch_bytes(rows, width, 1, 1));
  check(c, rnn_column_sums(elem(c, dtype_of<T>), m, rows, width, out, ws.raw(), stream(c)));
}

/// h_{t-1} of every batch row into hp [T, D] (the weight gradients' operand, kernels/cpu/rnn_batch.hpp
/// previous_hidden): rows of step 0 from h0 [S, D] when given (left alone without it), the rest from hs.
template <class T>
void previous_hidden(const KernelContext& c, const DeviceLayout& dl, int64_t rows, const T* hs, const T* h0, int64_t d, T* hp) {
  if (h0) copy_rows(c, h0, dl.order, hp, static_cast<const int64_t*>(nullptr), dl.k0, d);
  copy_rows(c, hs, dl.prev_seq + dl.k0, hp + dl.k0 * d, static_cast<const int64_t*>(nullptr), rows - dl.k0, d);
}

/// out [m, n] (contiguous) = a^T b over `k` rows (a [k, m], b [k, n] with leading dims lda, ldb); zeros for k = 0.
template <class T>
void gemm_tn(const KernelContext& c, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* out) {
  if (k == 0) return zeros(c, out, m * n);
  gemm<T>(c, true, false, m, n, k, T(1), a, lda, b, ldb, T(0), out, n);
}

/// gru's cell on the device: cpu_kernels::gru::Cell's weights and activations.
template <class T>
struct GruCell {
  int64_t d;
  int gate, candidate;
  const T *w_ur, *w_c;
  GruCell(int64_t dim, RnnAct g, RnnAct cand, const T* w) : d(dim), gate(int(g)), candidate(int(cand)), w_ur(w), w_c(w + 2 * dim * dim) {}
};

/// cpu_kernels::gru::forward_step on the device: k rows, g [k, 3D], hp [k, D] (null: zeros), rh, h [k, D], and
/// h's rows row_of[i] of hs when hs is given.
template <class T>
void gru_forward_step(const KernelContext& c, const GruCell<T>& p, int64_t k, T* g, const T* hp, T* rh, T* h, const int64_t* row_of, T* hs) {
  const int64_t d = p.d;
  const Elem e = elem(c, dtype_of<T>);
  if (hp) gemm<T>(c, false, false, k, 2 * d, d, T(1), hp, d, p.w_ur, 2 * d, T(1), g, 3 * d);
  check(c, gru_gates(e, p.gate, g, hp, rh, k, d, stream(c)));
  if (hp) gemm<T>(c, false, false, k, d, d, T(1), rh, d, p.w_c, d, T(1), g + 2 * d, 3 * d);
  check(c, gru_output(e, p.candidate, g, hp, h, row_of, hs, k, d, stream(c)));
}

/// cpu_kernels::gru::backward_step on the device: dg [k, 3D]; adds h_{t-1}'s gradient to dhp when given; drh:
/// scratch [k, D].
template <class T>
void gru_backward_step(const KernelContext& c, const GruCell<T>& p, int64_t k, const T* g, const T* hp, const T* dh, T* dhp, T* dg, T* drh) {
  const int64_t d = p.d;
  const Elem e = elem(c, dtype_of<T>);
  check(c, gru_gates_grad(e, p.gate, p.candidate, g, hp, dh, dg, dhp, k, d, stream(c)));
  if (!hp) return;
  gemm<T>(c, false, true, k, d, d, T(1), dg + 2 * d, 3 * d, p.w_c, d, T(0), drh, d);  // d(r * h_{t-1}) = dg_c W_c^T
  check(c, gru_reset_grad(e, p.gate, g, hp, drh, dg, dhp, k, d, stream(c)));
  if (dhp) gemm<T>(c, false, true, k, d, 2 * d, T(1), dg, 3 * d, p.w_ur, 2 * d, T(1), dhp, d);  // dh_{t-1} += [dg_u, dg_r] W_ur^T
}

/// Weight@GRAD [D, 3D] (Fluid's storage) from n rows of h_{t-1} (hp), r * h_{t-1} (rh) and dg.
template <class T>
void gru_weight_grad(const KernelContext& c, int64_t d, int64_t n, const T* hp, const T* rh, const T* dg, T* dw) {
  gemm_tn<T>(c, d, 2 * d, n, hp, d, dg, 3 * d, dw);
  gemm_tn<T>(c, d, d, n, rh, d, dg + 2 * d, 3 * d, dw + 2 * d * d);
}

}  // namespace oar::cuda_kernels::rnn

namespace oar::ops {

inline void Lstm::eval_cuda(KernelContext& c, const Attrs& a) {
  namespace ck = cuda_kernels;
  const kernels::lstm::ForwardArgs f = kernels::lstm::forward_args(c, a);
  const int64_t d = f.d, rows = f.rows;
  const kernels::rnn::BatchLayout& l = f.l;
  auto [hid, cel, gate, cpa] = kernels::lstm::outputs(c, f);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const ck::Elem e = ck::elem(c, f.x.dtype());
    const T* pw = f.w.data<T>();
    const T* pb = f.b ? f.b->data<T>() : nullptr;
    T *g = gate.data<T>(), *cb = cpa.data<T>(), *hs = hid.data<T>(), *cs = cel.data<T>();
    const ck::rnn::DeviceLayout dl = ck::rnn::upload_layout(c, l, false);
    const Tensor hbt = ck::rnn::buffer<T>(c, rows * d);  // h in the batch layout: the next step's gemm operand
    T* hb = hbt.data<T>();
    ck::check(c, ck::rnn_gate_inputs(e, f.x.data<T>(), dl.row_of, pb, g, rows, 4 * d, ck::stream(c)));
    // The initial states in the sorted order.
    const Tensor h0t = ck::rnn::buffer<T>(c, f.h0 ? dl.k0 * d : 0), c0t = ck::rnn::buffer<T>(c, f.c0 ? dl.k0 * d : 0);
    const T* h0s = f.h0 ? h0t.data<T>() : nullptr;
    const T* c0s = f.c0 ? c0t.data<T>() : nullptr;
    if (f.h0) ck::rnn::copy_rows(c, f.h0->data<T>(), dl.order, h0t.data<T>(), nullptr, dl.k0, d);
    if (f.c0) ck::rnn::copy_rows(c, f.c0->data<T>(), dl.order, c0t.data<T>(), nullptr, dl.k0, d);
    ck::LstmCell p{.d = d, .gate = int(a.gate), .cell = int(a.cell), .candidate = int(a.candidate), .peep = a.use_peepholes ? pb + 4 * d : nullptr};
    for (int64_t t = 0; t < l.steps; ++t) {
      const int64_t b0 = l.step_begin[t], k = l.active(t);
      const T* hp = t == 0 ? h0s : hb + l.step_begin[t - 1] * d;
      const T* cp = t == 0 ? c0s : cb + l.step_begin[t - 1] * d;
      if (hp) ck::gemm<T>(c, false, false, k, 4 * d, d, T(1), hp, d, pw, 4 * d, T(1), g + b0 * 4 * d, 4 * d);
      ck::check(c, ck::lstm_step(e, p, g + b0 * 4 * d, cp, cb + b0 * d, hb + b0 * d, dl.row_of + b0, hs, cs, k, ck::stream(c)));
    }
  });
  hid.set_lod(f.x.lod());
  cel.set_lod(f.x.lod());
}

inline void Lstm::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  namespace ck = cuda_kernels;
  const kernels::lstm::GradArgs ga = kernels::lstm::grad_args(c, a);
  const int64_t d = ga.d, rows = ga.rows;
  const kernels::rnn::BatchLayout& l = ga.l;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const ck::Elem e = ck::elem(c, ga.hid.dtype());
    const T* pw = ga.w.data<T>();
    const T* pb = ga.b ? ga.b->data<T>() : nullptr;
    const T *g = ga.gate.data<T>(), *cb = ga.cpa.data<T>();
    const ck::rnn::DeviceLayout dl = ck::rnn::upload_layout(c, l, true);
    const int64_t k0 = dl.k0;
    ck::LstmCell p{.d = d, .gate = int(a.gate), .cell = int(a.cell), .candidate = int(a.candidate), .peep = a.use_peepholes ? pb + 4 * d : nullptr};
    // Gradients of h and c in the batch layout: the outputs' own, plus what step t + 1 adds.
    const Tensor dhbt = ck::rnn::buffer<T>(c, rows * d), dcbt = ck::rnn::buffer<T>(c, rows * d), dgt = ck::rnn::buffer<T>(c, rows * 4 * d);
    T *dhb = dhbt.data<T>(), *dcb = dcbt.data<T>(), *dg = dgt.data<T>();
    ck::rnn::copy_rows(c, ga.dhid.data<T>(), dl.row_of, dhb, nullptr, rows, d);
    if (ga.dcel) ck::rnn::copy_rows(c, ga.dcel->data<T>(), dl.row_of, dcb, nullptr, rows, d);
    else ck::rnn::zeros(c, dcb, rows * d);
    // c_{-1} and the gradients reaching h_{-1}, c_{-1} in the sorted order.
    const Tensor c0t = ck::rnn::buffer<T>(c, ga.c0 ? k0 * d : 0), dh0t = ck::rnn::buffer<T>(c, ga.dh0 ? k0 * d : 0),
                 dc0t = ck::rnn::buffer<T>(c, ga.dc0 ? k0 * d : 0);
    T* c0s = ga.c0 ? c0t.data<T>() : nullptr;
    T* dh0s = ga.dh0 ? dh0t.data<T>() : nullptr;
    T* dc0s = ga.dc0 ? dc0t.data<T>() : nullptr;
    if (c0s) ck::rnn::copy_rows(c, ga.c0->data<T>(), dl.order, c0s, nullptr, k0, d);
    if (dh0s) ck::rnn::zeros(c, dh0s, k0 * d);
    if (dc0s) ck::rnn::zeros(c, dc0s, k0 * d);
    for (int64_t t = l.steps - 1; t >= 0; --t) {
      const int64_t b0 = l.step_begin[t], k = l.active(t);
      const T* cp = t == 0 ? c0s : cb + l.step_begin[t - 1] * d;
      T* dcp = t == 0 ? dc0s : dcb + l.step_begin[t - 1] * d;
      ck::check(c, ck::lstm_step_grad(e, p, g + b0 * 4 * d, cb + b0 * d, cp, dhb + b0 * d, dcb + b0 * d, dg + b0 * 4 * d, dcp, k, ck::stream(c)));
      // dh_{t-1} += dg Weight^T
      T* dhp = t > 0 ? dhb + l.step_begin[t - 1] * d : dh0s;
      if (dhp) ck::gemm<T>(c, false, true, k, d, 4 * d, T(1), dg + b0 * 4 * d, 4 * d, pw, 4 * d, T(1), dhp, d);
    }
    if (ga.dx) {
      ga.dx->resize(Shape{rows, 4 * d}, ga.hid.dtype());
      ck::rnn::copy_rows(c, dg, static_cast<const int64_t*>(nullptr), ga.dx->data<T>(), dl.row_of, rows, 4 * d);
      ga.dx->set_lod(ga.hid.lod());
    }
    if (ga.dw) {
      // Weight@GRAD = sum over rows of h_{t-1}^T dg (rows of step 0 only with H0: without it they add nothing).
      ga.dw->resize(ga.w.shape(), ga.w.dtype());
      const int64_t from = ga.h0 ? 0 : k0;
      const Tensor hpt = ck::rnn::buffer<T>(c, rows * d);
      T* hp = hpt.data<T>();
      ck::rnn::previous_hidden(c, dl, rows, ga.hid.data<T>(), ga.h0 ? ga.h0->data<T>() : nullptr, d, hp);
      ck::rnn::gemm_tn<T>(c, d, 4 * d, rows - from, hp + from * d, d, dg + from * 4 * d, 4 * d, ga.dw->data<T>());
    }
    if (ga.db) {
      ga.db->resize(ga.b->shape(), ga.b->dtype());
      T* pdb = ga.db->data<T>();
      ck::rnn::column_sums(c, dg, rows, 4 * d, pdb);
      if (a.use_peepholes) {
        // dW_ic = sum dg_i * c_{t-1}, dW_fc = sum dg_f * c_{t-1} (rows with a c_{t-1}), dW_oc = sum dg_o * c_t.
        Tensor ws = ck::workspace(c, ck::channel_scratch_bytes(rows, d, 1, 3));
        ck::check(c, ck::lstm_peephole_grad(e, dg, cb, c0s, dl.prev, k0, c0s ? 0 : k0, rows, d, pdb + 4 * d, ws.raw(), ck::stream(c)));
      }
    }
    if (ga.dh0) {
      ga.dh0->resize(Shape{l.seqs, d}, ga.h0->dtype());
      ck::rnn::copy_rows(c, static_cast<const T*>(dh0s), dl.init_src, ga.dh0->data<T>(), dl.order, l.seqs, d);
    }
    if (ga.dc0) {
      ga.dc0->resize(Shape{l.seqs, d}, ga.c0->dtype());
      ck::rnn::copy_rows(c, static_cast<const T*>(dc0s), dl.init_src, ga.dc0->data<T>(), dl.order, l.seqs, d);
    }
  });
}

inline void Gru::eval_cuda(KernelContext& c, const Attrs& a) {
  namespace ck = cuda_kernels;
  const kernels::gru::ForwardArgs f = kernels::gru::forward_args(c, a);
  const int64_t d = f.d, rows = f.rows;
  const kernels::rnn::BatchLayout& l = f.l;
  auto [hid, gate, rhp, bh] = kernels::gru::outputs(c, f);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    T *g = gate.data<T>(), *rh = rhp.data<T>(), *hb = bh.data<T>(), *hs = hid.data<T>();
    const ck::rnn::DeviceLayout dl = ck::rnn::upload_layout(c, l, false);
    ck::check(c, ck::rnn_gate_inputs(ck::elem(c, f.x.dtype()), f.x.data<T>(), dl.row_of, f.b ? f.b->data<T>() : nullptr, g, rows, 3 * d, ck::stream(c)));
    const Tensor h0t = ck::rnn::buffer<T>(c, f.h0 ? dl.k0 * d : 0);
    const T* h0s = f.h0 ? h0t.data<T>() : nullptr;
    if (f.h0) ck::rnn::copy_rows(c, f.h0->data<T>(), dl.order, h0t.data<T>(), nullptr, dl.k0, d);
    const ck::rnn::GruCell<T> p(d, a.gate, a.candidate, f.w.data<T>());
    for (int64_t t = 0; t < l.steps; ++t) {
      const int64_t b0 = l.step_begin[t];
      const T* hp = t == 0 ? h0s : hb + l.step_begin[t - 1] * d;
      ck::rnn::gru_forward_step(c, p, l.active(t), g + b0 * 3 * d, hp, rh + b0 * d, hb + b0 * d, dl.row_of + b0, hs);
    }
  });
  hid.set_lod(f.x.lod());
}

inline void Gru::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  namespace ck = cuda_kernels;
  const kernels::gru::GradArgs ga = kernels::gru::grad_args(c, a);
  const int64_t d = ga.d, rows = ga.rows;
  const kernels::rnn::BatchLayout& l = ga.l;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *g = ga.gate.data<T>(), *rh = ga.rhp.data<T>(), *hb = ga.bh.data<T>();
    const ck::rnn::GruCell<T> p(d, a.gate, a.candidate, ga.w.data<T>());
    const ck::rnn::DeviceLayout dl = ck::rnn::upload_layout(c, l, true);
    const int64_t k0 = dl.k0;
    const Tensor dhbt = ck::rnn::buffer<T>(c, rows * d), dgt = ck::rnn::buffer<T>(c, rows * 3 * d), drht = ck::rnn::buffer<T>(c, k0 * d);
    T *dhb = dhbt.data<T>(), *dg = dgt.data<T>(), *drh = drht.data<T>();
    ck::rnn::copy_rows(c, ga.dhid.data<T>(), dl.row_of, dhb, nullptr, rows, d);
    const Tensor h0t = ck::rnn::buffer<T>(c, ga.h0 ? k0 * d : 0), dh0t = ck::rnn::buffer<T>(c, ga.dh0 ? k0 * d : 0);
    const T* h0s = ga.h0 ? h0t.data<T>() : nullptr;
    T* dh0s = ga.dh0 ? dh0t.data<T>() : nullptr;
    if (ga.h0) ck::rnn::copy_rows(c, ga.h0->data<T>(), dl.order, h0t.data<T>(), nullptr, k0, d);
    if (dh0s) ck::rnn::zeros(c, dh0s, k0 * d);
    for (int64_t t = l.steps - 1; t >= 0; --t) {
      const int64_t b0 = l.step_begin[t];
      const T* hp = t == 0 ? h0s : hb + l.step_begin[t - 1] * d;
      T* dhp = t == 0 ? dh0s : dhb + l.step_begin[t - 1] * d;
      ck::rnn::gru_backward_step(c, p, l.active(t), g + b0 * 3 * d, hp, dhb + b0 * d, dhp, dg + b0 * 3 * d, drh);
    }
    if (ga.dx) {
      ga.dx->resize(Shape{rows, 3 * d}, ga.hid.dtype());
      ck::rnn::copy_rows(c, static_cast<const T*>(dg), nullptr, ga.dx->data<T>(), dl.row_of, rows, 3 * d);
      ga.dx->set_lod(ga.hid.lod());
    }
    if (ga.dw) {
      ga.dw->resize(ga.w.shape(), ga.w.dtype());
      const int64_t from = ga.h0 ? 0 : k0;  // without H0, step 0 adds nothing
      const Tensor hpt = ck::rnn::buffer<T>(c, rows * d);
      T* hp = hpt.data<T>();
      ck::rnn::previous_hidden(c, dl, rows, ga.hid.data<T>(), ga.h0 ? ga.h0->data<T>() : nullptr, d, hp);
      ck::rnn::gru_weight_grad<T>(c, d, rows - from, hp + from * d, rh + from * d, dg + from * 3 * d, ga.dw->data<T>());
    }
    if (ga.db) {
      ga.db->resize(Shape{1, 3 * d}, ga.hid.dtype());
      ck::rnn::column_sums(c, static_cast<const T*>(dg), rows, 3 * d, ga.db->data<T>());
    }
    if (ga.dh0) {
      ga.dh0->resize(Shape{l.seqs, d}, ga.h0->dtype());
      ck::rnn::copy_rows(c, static_cast<const T*>(dh0s), dl.init_src, ga.dh0->data<T>(), dl.order, l.seqs, d);
    }
  });
}

inline void LstmUnit::eval_cuda(KernelContext& ctx, const Attrs& a) {
  namespace ck = cuda_kernels;
  const kernels::lstm_unit::ForwardArgs f = kernels::lstm_unit::forward_args(ctx);
  ctx.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    ck::check(ctx, ck::lstm_unit(ck::elem(ctx, f.x.dtype()), f.x.data<T>(), f.c_prev.data<T>(), f.c.data<T>(), f.h.data<T>(), f.n, f.d, a.forget_bias,
                                 ck::stream(ctx)));
  });
}

inline void LstmUnit::eval_grad_cuda(KernelContext& ctx, const Attrs& a) {
  namespace ck = cuda_kernels;
  const kernels::lstm_unit::GradArgs ga = kernels::lstm_unit::grad_args(ctx);
  const LoDTensor &xt = ga.x, &cp = ga.c_prev, &ct = ga.c, &dct = ga.dc, &dht = ga.dh;
  const int64_t n = ga.n, d = ga.d;
  LoDTensor *dx = ga.dx, *dcp = ga.dc_prev;
  ctx.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    ck::check(ctx, ck::lstm_unit_grad(ck::elem(ctx, xt.dtype()), xt.data<T>(), cp.data<T>(), ct.data<T>(), dct.data<T>(), dht.data<T>(),
                                      dx ? dx->data<T>() : nullptr, dcp ? dcp->data<T>() : nullptr, n, d, a.forget_bias, ck::stream(ctx)));
  });
}

inline void GruUnit::eval_cuda(KernelContext& c, const Attrs& a) {
  namespace ck = cuda_kernels;
  const kernels::gru_unit::ForwardArgs f = kernels::gru_unit::forward_args(c);
  const int64_t d = f.d, n = f.n;
  auto [gt, rt, ht] = kernels::gru_unit::outputs(c, f);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    T* g = gt.data<T>();
    ck::check(c, ck::rnn_gate_inputs(ck::elem(c, f.x.dtype()), f.x.data<T>(), nullptr, f.b ? f.b->data<T>() : nullptr, g, n, 3 * d, ck::stream(c)));
    const ck::rnn::GruCell<T> p(d, a.gate, a.candidate, f.w.data<T>());
    ck::rnn::gru_forward_step<T>(c, p, n, g, f.hp.data<T>(), rt.data<T>(), ht.data<T>(), nullptr, nullptr);
  });
}

inline void GruUnit::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  namespace ck = cuda_kernels;
  const kernels::gru_unit::GradArgs ga = kernels::gru_unit::grad_args(c);
  const LoDTensor &hp = ga.hp, &w = ga.w, &gt = ga.gate, &rt = ga.rh, &dh = ga.dh;
  const int64_t d = ga.d, n = ga.n;
  LoDTensor *dx = ga.dx, *dhp = ga.dhp, *dw = ga.dw, *db = ga.db;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    Tensor dgt;
    T* dg;
    if (dx) {
      dx->resize(Shape{n, 3 * d}, hp.dtype());
      dg = dx->data<T>();
    } else {
      dgt = ck::rnn::buffer<T>(c, n * 3 * d);
      dg = dgt.data<T>();
    }
    T* dhpp = nullptr;
    if (dhp) {
      dhp->resize(hp.shape(), hp.dtype());
      dhpp = dhp->data<T>();
      ck::rnn::zeros(c, dhpp, n * d);
    }
    const ck::rnn::GruCell<T> p(d, a.gate, a.candidate, w.data<T>());
    const Tensor drh = ck::rnn::buffer<T>(c, n * d);
    ck::rnn::gru_backward_step<T>(c, p, n, gt.data<T>(), hp.data<T>(), dh.data<T>(), dhpp, dg, drh.data<T>());
    if (dw) {
      dw->resize(w.shape(), w.dtype());
      ck::rnn::gru_weight_grad<T>(c, d, n, hp.data<T>(), rt.data<T>(), dg, dw->data<T>());
    }
    if (db) {
      db->resize(Shape{1, 3 * d}, hp.dtype());
      ck::rnn::column_sums(c, static_cast<const T*>(dg), n, 3 * d, db->data<T>());
    }
  });
}

}  // namespace oar::ops
