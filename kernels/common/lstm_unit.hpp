// kernels/common/lstm_unit.hpp: lstm_unit's sizes and its gradient's inputs checked: the prologue of its kernels
// on every place.
#pragma once
#include <cstdint>
#include <utility>

#include "oar/ops/lstm_unit.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels::lstm_unit {

/// [N, D] of C_prev, checked against X [N, 4D] (the CPU and CUDA kernels' check).
inline std::pair<int64_t, int64_t> dims(const KernelContext& ctx, const LoDTensor& x, const LoDTensor& c_prev) {
  ctx.check(c_prev.rank() == 2 && x.rank() == 2 && x.dim(0) == c_prev.dim(0) && x.dim(1) == 4 * c_prev.dim(1), "X {} must be [N, 4D] for C_prev {} = [N, D]",
            x.shape(), c_prev.shape());
  return {c_prev.dim(0), c_prev.dim(1)};
}
/// lstm_unit's inputs, checked, and its outputs C and H sized [N, D]: what both places' kernels start from.
struct ForwardArgs {
  const LoDTensor &x, &c_prev;
  LoDTensor &c, &h;
  int64_t n, d;
};
inline ForwardArgs forward_args(KernelContext& ctx) {
  using U = ops::LstmUnit;
  const LoDTensor &x = ctx.in(U::x), &cp = ctx.in(U::c_prev);
  const auto [n, d] = dims(ctx, x, cp);
  LoDTensor &c = ctx.out(U::c), &h = ctx.out(U::h);
  c.resize(cp.shape(), x.dtype());
  h.resize(cp.shape(), x.dtype());
  return {x, cp, c, h, n, d};
}
/// lstm_unit_grad's inputs, checked, and its wanted outputs (null: not wanted) sized: what both places' kernels
/// start from.
struct GradArgs {
  const LoDTensor &x, &c_prev, &c, &dc, &dh;
  LoDTensor *dx, *dc_prev;
  int64_t n, d;
};
inline GradArgs grad_args(const KernelContext& ctx) {
  using U = ops::LstmUnit;
  const LoDTensor& c = ctx.in(U::c);
  const LoDTensor& dc = ctx.in(U::c_grad);
  const LoDTensor& dh = ctx.in(U::h_grad);
  ctx.check(dc.shape() == c.shape() && dh.shape() == c.shape(), "C@GRAD {} and H@GRAD {} must match C {}", dc.shape(), dh.shape(), c.shape());
  const LoDTensor &cp = ctx.in(U::c_prev), &x = ctx.in(U::x);
  LoDTensor* dx = ctx.out_if(U::x_grad);
  LoDTensor* dcp = ctx.out_if(U::c_prev_grad);
  if (dx) dx->resize(x.shape(), x.dtype());
  if (dcp) dcp->resize(cp.shape(), cp.dtype());
  return {x, cp, c, dc, dh, dx, dcp, cp.dim(0), cp.dim(1)};
}

}  // namespace oar::kernels::lstm_unit
