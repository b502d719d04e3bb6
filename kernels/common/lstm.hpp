// kernels/common/lstm.hpp: lstm's inputs and gradients checked, with the batch layout of its sequences: the
// prologue of its kernels on every place.
#pragma once
#include <cstdint>

#include "kernels/common/rnn_batch.hpp"
#include "oar/ops/lstm.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels::lstm {

/// lstm's inputs, checked, and the batch layout of its sequences: the prologue the CPU and CUDA kernels share.
struct ForwardArgs {
  const LoDTensor &x, &w;
  const LoDTensor *b, *h0, *c0;  ///< null when absent
  int64_t d, rows;
  rnn::BatchLayout l;
};
inline ForwardArgs forward_args(const KernelContext& c, const ops::Lstm::Attrs& a) {
  using L = ops::Lstm;
  const LoDTensor& x = c.in(L::input);
  const LoDTensor& w = c.in(L::weight);
  const int64_t d = rnn::check_projected(c, x, w, 4);
  const LoDTensor* b = c.in_if(L::bias);
  c.check(!a.use_peepholes || b, "use_peepholes needs Bias");
  if (b) c.check(b->numel() == (a.use_peepholes ? 7 : 4) * d, "Bias must have {} values, got {}", (a.use_peepholes ? 7 : 4) * d, b->shape());
  const rnn::BatchLayout l = rnn::layout_of(c, x, "Input", a.is_reverse);
  const LoDTensor* h0t = c.in_if(L::h0);
  const LoDTensor* c0t = c.in_if(L::c0);
  rnn::check_initial_states(c, {h0t, c0t}, l, d, "H0 / C0");
  return {x, w, b, h0t, c0t, d, x.dim(0), l};
}

/// lstm's outputs, sized for f: Hidden and Cell [T, D], BatchGate [T, 4D], BatchCellPreAct [T, D].
struct Outputs {
  LoDTensor &hidden, &cell, &gate, &cell_pre_act;
};
inline Outputs outputs(KernelContext& c, const ForwardArgs& f) {
  using L = ops::Lstm;
  Outputs o{c.out(L::hidden), c.out(L::cell), c.out(L::batch_gate), c.out(L::batch_cell_pre_act)};
  for (LoDTensor* t : {&o.hidden, &o.cell, &o.cell_pre_act}) t->resize(Shape{f.rows, f.d}, f.x.dtype());
  o.gate.resize(Shape{f.rows, 4 * f.d}, f.x.dtype());
  return o;
}

/// lstm_grad's inputs, checked, its wanted outputs (null: not wanted) and the batch layout.
struct GradArgs {
  const LoDTensor &w, &hid, &gate, &cpa, &dhid;
  const LoDTensor *dcel, *b, *h0, *c0;
  LoDTensor *dx, *dw, *db, *dh0, *dc0;
  int64_t d, rows;
  rnn::BatchLayout l;
};
inline GradArgs grad_args(const KernelContext& c, const ops::Lstm::Attrs& a) {
  using L = ops::Lstm;
  const LoDTensor& w = c.in(L::weight);
  const LoDTensor& hid = c.in(L::hidden);
  const LoDTensor& gate = c.in(L::batch_gate);
  const LoDTensor& cpa = c.in(L::batch_cell_pre_act);
  const LoDTensor& dhid = c.in(L::hidden_grad);
  const LoDTensor* dcel = c.in_if(L::cell_grad);
  const int64_t d = w.dim(0), rows = hid.dim(0);
  c.check(gate.dim(0) == rows && dhid.shape() == hid.shape() && (!dcel || dcel->shape() == hid.shape()),
          "Hidden {}, Hidden@GRAD {} and Cell@GRAD do not match", hid.shape(), dhid.shape());
  const LoDTensor* b = c.in_if(L::bias);
  c.check(!a.use_peepholes || b, "use_peepholes needs Bias");
  const rnn::BatchLayout l = rnn::layout_of(c, hid, "Hidden", a.is_reverse);
  const LoDTensor* h0t = c.in_if(L::h0);
  const LoDTensor* c0t = c.in_if(L::c0);
  LoDTensor* dx = c.out_if(L::input_grad);
  LoDTensor* dw = c.out_if(L::weight_grad);
  LoDTensor* db = b ? c.out_if(L::bias_grad) : nullptr;
  LoDTensor* dh0 = h0t ? c.out_if(L::h0_grad) : nullptr;
  LoDTensor* dc0 = c0t ? c.out_if(L::c0_grad) : nullptr;
  return {w, hid, gate, cpa, dhid, dcel, b, h0t, c0t, dx, dw, db, dh0, dc0, d, rows, l};
}

}  // namespace oar::kernels::lstm
