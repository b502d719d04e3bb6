// kernels/common/gru_unit.hpp: gru_unit's inputs and its gradient's checked: the prologue of its kernels on every
// place.
#pragma once
#include <cstdint>

#include "oar/ops/gru_unit.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels::gru_unit {

/// gru_unit's inputs, checked (the CPU and CUDA kernels' prologue).
struct ForwardArgs {
  const LoDTensor &x, &hp, &w;
  const LoDTensor* b;  ///< null when absent
  int64_t d, n;
};
inline ForwardArgs forward_args(const KernelContext& c) {
  using G = ops::GruUnit;
  const LoDTensor& x = c.in(G::input);
  const LoDTensor& hp = c.in(G::hidden_prev);
  const LoDTensor& w = c.in(G::weight);
  const int64_t d = w.dim(0), n = x.dim(0);
  c.check(w.rank() == 2 && w.dim(1) == 3 * d && x.rank() == 2 && x.dim(1) == 3 * d && hp.rank() == 2 && hp.dim(0) == n && hp.dim(1) == d,
          "Input {}, HiddenPrev {} and Weight {} must be [N, 3D], [N, D] and [D, 3D]", x.shape(), hp.shape(), w.shape());
  const LoDTensor* b = c.in_if(G::bias);
  if (b) c.check(b->numel() == 3 * d, "Bias must have {} values, got {}", 3 * d, b->shape());
  return {x, hp, w, b, d, n};
}

/// gru_unit's outputs, sized for f: Gate [N, 3D], ResetHiddenPrev and Hidden [N, D].
struct Outputs {
  LoDTensor &gate, &reset_hidden_prev, &hidden;
};
inline Outputs outputs(KernelContext& c, const ForwardArgs& f) {
  using G = ops::GruUnit;
  Outputs o{c.out(G::gate), c.out(G::reset_hidden_prev), c.out(G::hidden)};
  o.gate.resize(Shape{f.n, 3 * f.d}, f.x.dtype());
  o.reset_hidden_prev.resize(Shape{f.n, f.d}, f.x.dtype());
  o.hidden.resize(Shape{f.n, f.d}, f.x.dtype());
  return o;
}
/// gru_unit_grad's inputs, checked, and its wanted outputs (null: not wanted): what both places' kernels start from.
struct GradArgs {
  const LoDTensor &hp, &w, &gate, &rh, &dh;
  LoDTensor *dx, *dhp, *dw, *db;
  int64_t d, n;
};
inline GradArgs grad_args(const KernelContext& c) {
  using U = ops::GruUnit;
  const LoDTensor& hp = c.in(U::hidden_prev);
  const LoDTensor& w = c.in(U::weight);
  const LoDTensor& gate = c.in(U::gate);
  const LoDTensor& dh = c.in(U::hidden_grad);
  c.check(dh.shape() == hp.shape() && gate.dim(0) == hp.dim(0), "Hidden@GRAD {} must match HiddenPrev {}", dh.shape(), hp.shape());
  return {hp, w, gate, c.in(U::reset_hidden_prev), dh, c.out_if(U::input_grad), c.out_if(U::hidden_prev_grad), c.out_if(U::weight_grad),
          c.out_if(U::bias_grad), w.dim(0), hp.dim(0)};
}

}  // namespace oar::kernels::gru_unit
