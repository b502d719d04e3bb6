// kernels/cpu/sequence_slice.hpp: sequence_slice and its grad on the CPU: one block copy per sequence.
#pragma once
#include <cstring>

#include "kernels/cpu/sequence_conv.hpp"  // seq_shape::last_level
#include "oar/ops/sequence_slice.hpp"

namespace oar::cpu_kernels::seq_shape {

/// Offset and Length of sequence_slice as spans, checked against the S sequences of `offs`: i64, S entries,
/// 0 <= offset, 0 <= length, offset + length <= the sequence's length.
struct SliceSpec {
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
  SliceSpec s{{ot.data<int64_t>(), n}, {lt.data<int64_t>(), n}};
  for (size_t i = 0; i < n; ++i) {
    const int64_t len = int64_t(offs[i + 1] - offs[i]);
    c.check(s.offset[i] >= 0 && s.length[i] >= 0 && s.offset[i] + s.length[i] <= len,
            "sequence {} has {} rows; Offset {} and Length {} must satisfy 0 <= Offset, 0 <= Length, Offset + Length <= {}", i, len, s.offset[i],
            s.length[i], len);
  }
  return s;
}

}  // namespace oar::cpu_kernels::seq_shape

namespace oar::ops {

inline void SequenceSlice::eval_cpu(KernelContext& c, const NoAttrs&) {
  const LoDTensor& xt = c.in(x);
  c.check(xt.rank() >= 1, "X must have rank >= 1, got {}", xt.shape());
  auto offs = cpu_kernels::seq_shape::last_level(c, xt, x);
  auto spec = cpu_kernels::seq_shape::slice_spec(c, offs);
  // NOTE: a per-thread LoD: assigning into it reuses its vectors, so a steady state allocates nothing.
  thread_local LoD lod;
  lod = xt.lod();
  std::vector<size_t>& last = lod.back();
  for (size_t i = 0; i < spec.length.size(); ++i) last[i + 1] = last[i] + size_t(spec.length[i]);
  Shape os = xt.shape();
  os[0] = int64_t(last.back());
  LoDTensor& ot = c.out(out);
  ot.resize(os, xt.dtype());
  const size_t row = xt.dim(0) ? xt.bytes() / size_t(xt.dim(0)) : 0;
  const char* src = static_cast<const char*>(xt.raw());
  char* dst = static_cast<char*>(ot.raw());
  for (size_t i = 0; i < spec.length.size(); ++i)
    if (spec.length[i]) std::memcpy(dst + last[i] * row, src + (offs[i] + size_t(spec.offset[i])) * row, size_t(spec.length[i]) * row);
  ot.set_lod(lod);
}

inline void SequenceSlice::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  auto offs = cpu_kernels::seq_shape::last_level(c, xt, x);
  auto spec = cpu_kernels::seq_shape::slice_spec(c, offs);
  int64_t rows = 0;
  for (int64_t l : spec.length) rows += l;
  c.check(dout.rank() == xt.rank() && dout.dim(0) == rows && dout.numel() == (xt.dim(0) ? xt.numel() / xt.dim(0) * rows : 0) &&
              dout.dtype() == xt.dtype(),
          "Out@GRAD {} {} must hold the {} sliced rows of X {} {}", dout.shape(), name(dout.dtype()), rows, xt.shape(), name(xt.dtype()));
  LoDTensor& dx = c.out(x_grad);
  dx.resize(xt.shape(), xt.dtype());
  const size_t row = xt.dim(0) ? xt.bytes() / size_t(xt.dim(0)) : 0;
  char* dst = static_cast<char*>(dx.raw());
  const char* src = static_cast<const char*>(dout.raw());
  if (xt.bytes()) std::memset(dst, 0, xt.bytes());  // all-zero bytes are 0.0 for f32 and f64
  size_t at = 0;
  for (size_t i = 0; i < spec.length.size(); ++i) {
    if (spec.length[i]) std::memcpy(dst + (offs[i] + size_t(spec.offset[i])) * row, src + at * row, size_t(spec.length[i]) * row);
    at += size_t(spec.length[i]);
  }
  dx.set_lod(xt.lod());
}

}  // namespace oar::ops
