// kernels/common/sequence_pad.hpp: the checked sequences, lengths and outputs that sequence_pad's and
// sequence_unpad's kernels and their gradients start from on every place (lengths read on the host).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/common/place_io.hpp"
#include "kernels/common/sequence_conv.hpp"
#include "oar/ops/sequence_pad.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels::seq_shape {

/// The row where top-level sequence i of `lod` starts (Fluid's absolute offset: followed down every level).
inline size_t top_offset(const LoD& lod, size_t i) {
  size_t k = lod[0][i];
  for (size_t l = 1; l < lod.size(); ++l) k = lod[l][k];
  return k;
}

/// The dtypes the copying kernels take.
using copy_types = type_list<float, double, int32_t, int64_t>;

/// What sequence_pad's kernels on every place start from: X's top-level sequences (`seqs` of them, rows of
/// `step` values), `padded` steps each, PadValue checked, Out resized to [seqs, padded, step...] and Length to
/// i64 [seqs] (no LoD); the caller writes both.
struct PadPlan {
  const LoD* lod = nullptr;
  int64_t seqs = 0, step = 0, padded = 0;
  LoDTensor* out = nullptr;
  LoDTensor* length = nullptr;
  /// The rows of top-level sequence s.
  int64_t len(int64_t s) const { return int64_t(top_offset(*lod, size_t(s + 1)) - top_offset(*lod, size_t(s))); }
};
inline PadPlan pad_plan(const KernelContext& c, const ops::SequencePad::Attrs& a) {
  using Op = ops::SequencePad;
  const LoDTensor& xt = c.in(Op::x);
  const LoDTensor& pv = c.in(Op::pad_value);
  c.check(xt.rank() >= 2, "X must be [N, step...] with rank >= 2, got {}", xt.shape());
  last_level(c, xt, Op::x);
  PadPlan p;
  p.lod = &xt.lod();
  p.seqs = int64_t(p.lod->front().size()) - 1, p.step = xt.shape().numel(1, xt.rank());
  c.check(pv.dtype() == xt.dtype() && (pv.numel() == 1 || pv.numel() == p.step), "PadValue must be {} with 1 or {} (a step of X) elements, got {} {}",
          name(xt.dtype()), p.step, pv.shape(), name(pv.dtype()));
  int64_t longest = 0;
  for (int64_t s = 0; s < p.seqs; ++s) longest = std::max(longest, p.len(s));
  p.padded = a.padded_length == -1 ? longest : a.padded_length;
  c.check(p.padded >= longest, "padded_length = {} is shorter than the longest sequence ({} rows)", p.padded, longest);
  Shape os{p.seqs, p.padded};
  for (int i = 1; i < xt.rank(); ++i) os.push_back(xt.dim(i));
  p.length = &c.out(Op::length);
  p.length->resize(Shape{p.seqs}, DType::i64);
  p.length->clear_lod();
  c.dispatch(copy_types{}, xt.dtype(), [](auto) {});  // the dtypes both places take
  p.out = &c.out(Op::out);
  p.out->resize(os, xt.dtype());
  p.out->clear_lod();
  return p;
}

/// The same for the gradient: Out@GRAD checked against X's sequences (each at most its padded steps), X@GRAD
/// resized to X's shape.
struct PadGradPlan {
  const LoD* lod = nullptr;
  int64_t seqs = 0, step = 0, padded = 0;
  LoDTensor* x_grad = nullptr;
};
inline PadGradPlan pad_grad_plan(const KernelContext& c) {
  using Op = ops::SequencePad;
  const LoDTensor& xt = c.in(Op::x);
  const LoDTensor& dout = c.in(Op::out_grad);
  last_level(c, xt, Op::x);
  PadGradPlan p;
  p.lod = &xt.lod();
  p.seqs = int64_t(p.lod->front().size()) - 1, p.step = xt.shape().numel(1, xt.rank());
  c.check(dout.rank() == xt.rank() + 1 && dout.dim(0) == p.seqs && dout.shape().numel(2, dout.rank()) == p.step && dout.dtype() == xt.dtype(),
          "Out@GRAD {} {} must be [{}, padded_length, step...] for X {} {}", dout.shape(), name(dout.dtype()), p.seqs, xt.shape(), name(xt.dtype()));
  p.padded = dout.dim(1);
  for (int64_t s = 0; s < p.seqs; ++s) {
    const int64_t len = int64_t(top_offset(*p.lod, size_t(s + 1)) - top_offset(*p.lod, size_t(s)));
    c.check(len <= p.padded, "sequence {} has {} rows but Out@GRAD holds {} steps", s, len, p.padded);
  }
  c.dispatch(copy_types{}, xt.dtype(), [](auto) {});
  p.x_grad = &c.out(Op::x_grad);
  p.x_grad->resize(xt.shape(), xt.dtype());
  return p;
}

/// What sequence_unpad's kernels and their gradients share: X as [seqs, steps, step...] and the lengths (Length's
/// values, read on the host), checked to lie in [0, steps].
struct UnpadLengths {
  int64_t seqs = 0, steps = 0, step = 0;
  Tensor lengths;                ///< Length's values on the host
  const int64_t* len = nullptr;  ///< in `lengths`
};
inline UnpadLengths unpad_lengths(const KernelContext& c) {
  using Op = ops::SequenceUnpad;
  const LoDTensor& xt = c.in(Op::x);
  c.check(xt.rank() >= 2, "X must be [S, L, step...] with rank >= 2, got {}", xt.shape());
  UnpadLengths p;
  p.seqs = xt.dim(0), p.steps = xt.dim(1), p.step = xt.shape().numel(2, xt.rank());
  const LoDTensor& lt = c.in(Op::length);
  c.check(lt.dtype() == DType::i64 && lt.numel() == p.seqs, "Length must be i64 with one entry per sequence ({}), got {} {}", p.seqs, lt.shape(),
          name(lt.dtype()));
  p.lengths = place_io::host(c, lt);
  p.len = p.lengths.data<int64_t>();
  for (int64_t s = 0; s < p.seqs; ++s)
    c.check(p.len[s] >= 0 && p.len[s] <= p.steps, "Length[{}] = {} is outside [0, {}] (the steps of X)", s, p.len[s], p.steps);
  return p;
}

/// What sequence_unpad's kernels on every place start from: the lengths, Out resized to their sum and its LoD
/// (a per-thread one) for the caller to set.
struct UnpadPlan : UnpadLengths {
  const LoD* lod = nullptr;
  LoDTensor* out = nullptr;
};
inline UnpadPlan unpad_plan(const KernelContext& c) {
  using Op = ops::SequenceUnpad;
  const LoDTensor& xt = c.in(Op::x);
  UnpadPlan p{unpad_lengths(c)};
  // NOTE: a per-thread LoD: resizing it to a size it had before allocates nothing.
  thread_local LoD lod;
  lod.resize(1);
  std::vector<size_t>& offs = lod[0];
  offs.resize(size_t(p.seqs) + 1);
  offs[0] = 0;
  for (int64_t s = 0; s < p.seqs; ++s) offs[size_t(s) + 1] = offs[size_t(s)] + size_t(p.len[s]);
  p.lod = &lod;
  Shape os{int64_t(offs.back())};
  for (int i = 2; i < xt.rank(); ++i) os.push_back(xt.dim(i));
  c.dispatch(copy_types{}, xt.dtype(), [](auto) {});
  p.out = &c.out(Op::out);
  p.out->resize(os, xt.dtype());
  return p;
}

/// The same for the gradient: the lengths, Out@GRAD checked against their sum, X@GRAD resized to X's shape.
struct UnpadGradPlan : UnpadLengths {
  LoDTensor* x_grad = nullptr;
};
inline UnpadGradPlan unpad_grad_plan(const KernelContext& c) {
  using Op = ops::SequenceUnpad;
  const LoDTensor& xt = c.in(Op::x);
  const LoDTensor& dout = c.in(Op::out_grad);
  UnpadGradPlan p{unpad_lengths(c)};
  int64_t rows = 0;
  for (int64_t s = 0; s < p.seqs; ++s) rows += p.len[s];
  c.check(dout.rank() >= 1 && dout.dim(0) == rows && dout.numel() == rows * p.step && dout.dtype() == xt.dtype(),
          "Out@GRAD {} {} must hold the {} unpadded rows of X {} {}", dout.shape(), name(dout.dtype()), rows, xt.shape(), name(xt.dtype()));
  c.dispatch(copy_types{}, xt.dtype(), [](auto) {});
  p.x_grad = &c.out(Op::x_grad);
  p.x_grad->resize(xt.shape(), xt.dtype());
  return p;
}

}  // namespace oar::kernels::seq_shape
