// kernels/common/sequence_slice.hpp: Offset and Length read on the host and checked, and the outputs that
// sequence_slice's kernels and their gradients start from on every place.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/common/place_io.hpp"
#include "kernels/common/sequence_conv.hpp"
#include "oar/ops/sequence_slice.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels::seq_shape {

/// Offset and Length of sequence_slice as spans over their values on the host, checked against the S
/// sequences of `offs`: i64, S entries, 0 <= offset, 0 <= length, offset + length <= the sequence's length.
struct SliceSpec {
  Tensor offset_values, length_values;  ///< on the host: the inputs themselves on the CPU
  std::span<const int64_t> offset, length;
};
inline SliceSpec slice_spec(const KernelContext& c, std::span<const size_t> offs) {
  using S = ops::SequenceSlice;
  const LoDTensor& ot = c.in(S::offset);
  const LoDTensor& lt = c.in(S::length);
  const size_t n = offs.size() - 1;
  c.check(ot.dtype() == DType::i64 && lt.dtype() == DType::i64, "Offset and Length must be i64, got {} and {}", name(ot.dtype()), name(lt.dtype()));
  c.check(size_t(ot.numel()) == n && size_t(lt.numel()) == n, "Offset {} and Length {} must have one entry per sequence of X ({})", ot.shape(),
          lt.shape(), n);
  SliceSpec s{place_io::host(c, ot), place_io::host(c, lt), {}, {}};
  s.offset = {s.offset_values.data<int64_t>(), n};
  s.length = {s.length_values.data<int64_t>(), n};
  for (size_t i = 0; i < n; ++i) {
    const int64_t len = int64_t(offs[i + 1] - offs[i]);
    c.check(s.offset[i] >= 0 && s.length[i] >= 0 && s.offset[i] + s.length[i] <= len,
            "sequence {} has {} rows; Offset {} and Length {} must satisfy 0 <= Offset, 0 <= Length, Offset + Length <= {}", i, len, s.offset[i],
            s.length[i], len);
  }
  return s;
}

/// What sequence_slice's kernels on every place start from: X's last-level sequences, the checked spec, Out
/// resized to the lengths' sum, and Out's LoD (a per-thread one: X's with the last level cut) for the caller to
/// set. Row: the bytes of one row of X.
struct SlicePlan {
  std::span<const size_t> offs;
  SliceSpec spec;
  const LoD* lod = nullptr;
  size_t row = 0;
  LoDTensor* out = nullptr;
};
inline SlicePlan slice_plan(const KernelContext& c) {
  using Op = ops::SequenceSlice;
  const LoDTensor& xt = c.in(Op::x);
  c.check(xt.rank() >= 1, "X must have rank >= 1, got {}", xt.shape());
  SlicePlan p;
  p.offs = last_level(c, xt, Op::x);
  p.spec = slice_spec(c, p.offs);
  // NOTE: a per-thread LoD: assigning into it reuses its vectors, so a steady state allocates nothing.
  thread_local LoD lod;
  lod = xt.lod();
  std::vector<size_t>& last = lod.back();
  for (size_t i = 0; i < p.spec.length.size(); ++i) last[i + 1] = last[i] + size_t(p.spec.length[i]);
  p.lod = &lod;
  Shape os = xt.shape();
  os[0] = int64_t(last.back());
  p.out = &c.out(Op::out);
  p.out->resize(os, xt.dtype());
  p.row = xt.dim(0) ? xt.bytes() / size_t(xt.dim(0)) : 0;
  return p;
}

/// The same for the gradient: Out@GRAD checked against the sliced rows, X@GRAD resized to X's shape.
struct SliceGradPlan {
  std::span<const size_t> offs;
  SliceSpec spec;
  size_t row = 0;
  LoDTensor* x_grad = nullptr;
};
inline SliceGradPlan slice_grad_plan(const KernelContext& c) {
  using Op = ops::SequenceSlice;
  const LoDTensor& xt = c.in(Op::x);
  const LoDTensor& dout = c.in(Op::out_grad);
  SliceGradPlan p;
  p.offs = last_level(c, xt, Op::x);
  p.spec = slice_spec(c, p.offs);
  int64_t rows = 0;
  for (int64_t l : p.spec.length) rows += l;
  c.check(dout.rank() == xt.rank() && dout.dim(0) == rows && dout.numel() == (xt.dim(0) ? xt.numel() / xt.dim(0) * rows : 0) &&
              dout.dtype() == xt.dtype(),
          "Out@GRAD {} {} must hold the {} sliced rows of X {} {}", dout.shape(), name(dout.dtype()), rows, xt.shape(), name(xt.dtype()));
  p.x_grad = &c.out(Op::x_grad);
  p.x_grad->resize(xt.shape(), xt.dtype());
  p.row = xt.dim(0) ? xt.bytes() / size_t(xt.dim(0)) : 0;
  return p;
}

}  // namespace oar::kernels::seq_shape
