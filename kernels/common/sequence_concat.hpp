// kernels/common/sequence_concat.hpp: the checked inputs, Out and its LoD that sequence_concat's kernels and
// their gradients start from on every place.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/common/sequence_pool.hpp"
#include "oar/ops/sequence_concat.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// What sequence_concat's kernels on every place start from: the n inputs checked (S sequences each, one LoD
/// level, rows of D values, the same dtype and dims after the first), Out resized to their rows, and Out's LoD
/// (the sums of the inputs' offsets, in a per-thread scratch) for the caller to set after the copy.
struct ConcatPlan {
  size_t n = 0, S = 0;
  int64_t D = 0;
  LoDTensor* out = nullptr;
  const LoD* lod = nullptr;
};
inline ConcatPlan concat_plan(const KernelContext& c) {
  using Op = ops::SequenceConcat;
  ConcatPlan p;
  p.n = c.num_in(Op::x);
  const LoDTensor& x0 = c.in(Op::x, 0);
  p.S = seq_last_level(c, Op::x, x0, 0).size() - 1;
  p.D = row_size(x0);
  int64_t rows = 0;
  for (size_t k = 0; k < p.n; ++k) {
    const LoDTensor& xk = c.in(Op::x, k);
    const size_t sk = seq_last_level(c, Op::x, xk, k).size() - 1;
    c.check(xk.lod_level() == 1, "X[{}] ('{}') has {} LoD levels; sequence_concat joins inputs of exactly 1", k, c.in_name(Op::x, k), xk.lod_level());
    c.check(sk == p.S, "X[{}] ('{}') has {} sequences but X[0] has {}; every input needs the same number", k, c.in_name(Op::x, k), sk, p.S);
    bool ok = xk.dtype() == x0.dtype() && xk.rank() == x0.rank();
    for (int d = 1; ok && d < x0.rank(); ++d) ok = xk.dim(d) == x0.dim(d);
    c.check(ok, "X[{}] {} {} does not fit X[0] {} {} (only the rows may differ)", k, xk.shape(), name(xk.dtype()), x0.shape(), name(x0.dtype()));
    rows += xk.dim(0);
  }
  p.out = &c.out(Op::out);
  for (size_t k = 0; k < p.n; ++k) c.check(&c.in(Op::x, k) != p.out, "Out cannot be one of the inputs");
  LoD& lod = seq_lod_scratch(1);
  lod[0].assign(p.S + 1, 0);
  for (size_t k = 0; k < p.n; ++k)
    for (size_t s = 0; s <= p.S; ++s) lod[0][s] += c.in(Op::x, k).lod()[0][s];
  p.lod = &lod;
  Shape os = x0.shape();
  os[0] = rows;
  p.out->resize(os, x0.dtype());
  return p;
}

/// The same for the gradient: the inputs checked against X[0], Out@GRAD against their rows, and each wanted
/// X@GRAD[k] resized to X[k]'s shape.
struct ConcatGradPlan {
  size_t n = 0, S = 0;
  int64_t D = 0;
};
inline ConcatGradPlan concat_grad_plan(const KernelContext& c) {
  using Op = ops::SequenceConcat;
  ConcatGradPlan p;
  p.n = c.num_in(Op::x);
  const LoDTensor& x0 = c.in(Op::x, 0);
  const LoDTensor& dout = c.in(Op::out_grad);
  p.S = seq_last_level(c, Op::x, x0, 0).size() - 1;
  p.D = row_size(x0);
  int64_t rows = 0;
  for (size_t k = 0; k < p.n; ++k) {
    const size_t sk = seq_last_level(c, Op::x, c.in(Op::x, k), k).size() - 1;
    c.check(sk == p.S && c.in(Op::x, k).lod_level() == 1 && row_size(c.in(Op::x, k)) == p.D, "X[{}] ('{}') does not fit X[0]", k, c.in_name(Op::x, k));
    rows += c.in(Op::x, k).dim(0);
  }
  c.check(dout.rank() >= 1 && dout.dim(0) == rows && dout.numel() == rows * p.D && dout.dtype() == x0.dtype(), "Out@GRAD {} does not fit Out [{}, ...] {}",
          dout.shape(), rows, name(x0.dtype()));
  for (size_t k = 0; k < p.n; ++k)
    if (c.has_out(Op::x_grad, k)) c.out(Op::x_grad, k).resize(c.in(Op::x, k).shape(), x0.dtype());
  return p;
}

}  // namespace oar::kernels
