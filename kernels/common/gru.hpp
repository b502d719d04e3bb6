// kernels/common/gru.hpp: gru's inputs and gradients checked, with the batch layout of its sequences: the
// prologue of its kernels on every place.
#pragma once
#include <cstdint>

#include "kernels/common/rnn_batch.hpp"
#include "oar/ops/gru.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels::gru {

/// gru's inputs, checked, and the batch layout of its sequences: the prologue the CPU and CUDA kernels share.
struct ForwardArgs {
  const LoDTensor &x, &w;
  const LoDTensor *b, *h0;  ///< null when absent
  int64_t d, rows;
  rnn::BatchLayout l;
};
inline ForwardArgs forward_args(const KernelContext& c, const ops::Gru::Attrs& a) {
  using G = ops::Gru;
  const LoDTensor& x = c.in(G::input);
  const LoDTensor& w = c.in(G::weight);
  const int64_t d = w.dim(0), rows = x.dim(0);
  c.check(w.rank() == 2 && w.dim(1) == 3 * d, "Weight must be [D, 3D], got {}", w.shape());
  c.check(x.rank() == 2 && x.dim(1) == 3 * d, "Input must be [T, {}], got {}", 3 * d, x.shape());
  const LoDTensor* b = c.has_in(G::bias) ? &c.in(G::bias) : nullptr;
  if (b) c.check(b->numel() == 3 * d, "Bias must have {} values, got {}", 3 * d, b->shape());
  const auto offsets = rnn::sequence_offsets(c, x, "Input");
  const rnn::BatchLayout l = rnn::make_batch_layout(offsets, rows, a.is_reverse);
  const LoDTensor* h0t = c.has_in(G::h0) ? &c.in(G::h0) : nullptr;
  if (h0t) c.check(h0t->rank() == 2 && h0t->dim(0) == l.seqs && h0t->dim(1) == d, "H0 must be [S, D] = [{}, {}] for {} sequences, got {}", l.seqs, d, l.seqs, h0t->shape());
  return {x, w, b, h0t, d, rows, l};
}

/// gru's outputs, sized for f: Hidden, BatchResetHiddenPrev and BatchHidden [T, D], BatchGate [T, 3D].
struct Outputs {
  LoDTensor &hidden, &gate, &reset_hidden_prev, &batch_hidden;
};
inline Outputs outputs(KernelContext& c, const ForwardArgs& f) {
  using G = ops::Gru;
  Outputs o{c.out(G::hidden), c.out(G::batch_gate), c.out(G::batch_reset_hidden_prev), c.out(G::batch_hidden)};
  for (LoDTensor* t : {&o.hidden, &o.reset_hidden_prev, &o.batch_hidden}) t->resize(Shape{f.rows, f.d}, f.x.dtype());
  o.gate.resize(Shape{f.rows, 3 * f.d}, f.x.dtype());
  return o;
}

/// gru_grad's inputs, checked, its wanted outputs (null: not wanted) and the batch layout.
struct GradArgs {
  const LoDTensor &w, &hid, &gate, &rhp, &bh, &dhid;
  const LoDTensor* h0;
  LoDTensor *dx, *dw, *db, *dh0;
  int64_t d, rows;
  rnn::BatchLayout l;
};
inline GradArgs grad_args(const KernelContext& c, const ops::Gru::Attrs& a) {
  using G = ops::Gru;
  const LoDTensor& w = c.in(G::weight);
  const LoDTensor& hid = c.in(G::hidden);
  const LoDTensor& gate = c.in(G::batch_gate);
  const LoDTensor& rhp = c.in(G::batch_reset_hidden_prev);
  const LoDTensor& bh = c.in(G::batch_hidden);
  const LoDTensor& dhid = c.in(G::hidden_grad);
  const int64_t d = w.dim(0), rows = hid.dim(0);
  c.check(gate.dim(0) == rows && dhid.shape() == hid.shape(), "Hidden {} and Hidden@GRAD {} do not match", hid.shape(), dhid.shape());
  const auto offsets = rnn::sequence_offsets(c, hid, "Hidden");
  const rnn::BatchLayout l = rnn::make_batch_layout(offsets, rows, a.is_reverse);
  const LoDTensor* h0t = c.has_in(G::h0) ? &c.in(G::h0) : nullptr;
  LoDTensor* dx = c.has_out(G::input_grad) ? &c.out(G::input_grad) : nullptr;
  LoDTensor* dw = c.has_out(G::weight_grad) ? &c.out(G::weight_grad) : nullptr;
  LoDTensor* db = c.has_out(G::bias_grad) ? &c.out(G::bias_grad) : nullptr;
  LoDTensor* dh0 = h0t && c.has_out(G::h0_grad) ? &c.out(G::h0_grad) : nullptr;
  return {w, hid, gate, rhp, bh, dhid, h0t, dx, dw, db, dh0, d, rows, l};
}

}  // namespace oar::kernels::gru
