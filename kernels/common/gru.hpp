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
  const int64_t d = rnn::check_projected(c, x, w, 3);
  const LoDTensor* b = c.in_if(G::bias);
  if (b) c.check(b->numel() == 3 * d, "Bias must have {} values, got {}", 3 * d, b->shape());
  const rnn::BatchLayout l = rnn::layout_of(c, x, "Input", a.is_reverse);
  const LoDTensor* h0t = c.in_if(G::h0);
  rnn::check_initial_states(c, {h0t}, l, d, "H0");
  return {x, w, b, h0t, d, x.dim(0), l};
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
  const rnn::BatchLayout l = rnn::layout_of(c, hid, "Hidden", a.is_reverse);
  const LoDTensor* h0t = c.in_if(G::h0);
  LoDTensor* dx = c.out_if(G::input_grad);
  LoDTensor* dw = c.out_if(G::weight_grad);
  LoDTensor* db = c.out_if(G::bias_grad);
  LoDTensor* dh0 = h0t ? c.out_if(G::h0_grad) : nullptr;
  return {w, hid, gate, rhp, bh, dhid, h0t, dx, dw, db, dh0, d, rows, l};
}

}  // namespace oar::kernels::gru
