// kernels/common/sequence_pool.hpp: the LoD helpers every sequence kernel shares, on every place (the checked
// last level, rows, scratch LoDs), and the checks and outputs sequence_pool's kernels start from.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "oar/ops/sequence_pool.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// The offsets of `t`'s last LoD level (t is input `slot` of the running op), after checking that t has a LoD
/// that is well formed and ends at t's rows; else an oar::Error naming the op, the slot and the variable.
inline std::span<const size_t> seq_last_level(const KernelContext& c, Slot slot, const LoDTensor& t, size_t i = 0) {
  c.check(t.rank() >= 1, "{} ('{}') must have rows (rank >= 1), got a scalar", slot.name, c.in_name(slot, i));
  c.check(t.lod_level() >= 1, "{} ('{}') {} has no LoD, but this op works on sequences (feed a LoDTensor with offsets)", slot.name,
          c.in_name(slot, i), t.shape());
  const std::string why = lod_error(t.lod(), t.dim(0));  // "" (no allocation) unless the LoD is bad
  c.check(why.empty(), "{} ('{}') {} has a bad LoD: {}", slot.name, c.in_name(slot, i), t.shape(), why);
  return t.lod().back();
}

/// Elements per row of `t` (the product of the dims after the first).
inline int64_t row_size(const Tensor& t) { return t.shape().numel(1, t.rank()); }

/// A per-thread LoD of `levels` levels to build an output's LoD in before `set_lod` copies it. There is one
/// per level count: the kernels share them, and shrinking one LoD to fewer levels would free the vectors of
/// the rest, which the next deeper LoD would allocate again; this way a steady run allocates nothing.
/// ensures: the levels' contents are unspecified.
inline LoD& seq_lod_scratch(size_t levels) {
  thread_local std::vector<LoD> by_levels;
  if (by_levels.size() <= levels) by_levels.resize(levels + 1);
  LoD& lod = by_levels[levels];
  lod.resize(levels);
  return lod;
}

/// `lod` without its last level, in a scratch LoD.
inline const LoD& seq_upper_levels(const LoD& lod) {
  LoD& s = seq_lod_scratch(lod.size() - 1);
  for (size_t l = 0; l + 1 < lod.size(); ++l) s[l].assign(lod[l].begin(), lod[l].end());
  return s;
}

/// What sequence_pool's kernels on every place start from: X's last-level sequences (S of them, rows of D
/// values), Out resized to [S, ...], MaxIndex (when asked for) to i32 [S, ...] under MAX and [0] otherwise.
struct PoolPlan {
  std::span<const size_t> seq;
  int64_t S = 0, D = 0;
  LoDTensor* out = nullptr;
  int32_t* max_index = nullptr;  ///< MAX with MaxIndex asked for, else null
};
inline PoolPlan pool_plan(const KernelContext& c, const ops::SequencePool::Attrs& a) {
  using Op = ops::SequencePool;
  const LoDTensor& xt = c.in(Op::x);
  PoolPlan p;
  p.seq = seq_last_level(c, Op::x, xt);
  p.S = int64_t(p.seq.size()) - 1, p.D = row_size(xt);
  Shape os = xt.shape();
  os[0] = p.S;
  c.dispatch(type_list<float, double>{}, xt.dtype(), [](auto) {});  // the dtypes both places take
  p.out = &c.out(Op::out);
  p.out->resize(os, xt.dtype());
  if (c.has_out(Op::max_index)) {
    LoDTensor& mi = c.out(Op::max_index);
    mi.resize(a.pooltype == ops::SequencePool::PoolType::max ? os : Shape{0}, DType::i32);
    if (a.pooltype == ops::SequencePool::PoolType::max) p.max_index = mi.data<int32_t>();
  }
  return p;
}

/// The same for the gradient: Out@GRAD checked against the sequences, MaxIndex under MAX (its values are
/// checked where they are read), X@GRAD resized to X's shape.
struct PoolGradPlan {
  std::span<const size_t> seq;
  int64_t S = 0, D = 0;
  const LoDTensor* max_index = nullptr;
  LoDTensor* x_grad = nullptr;
};
inline PoolGradPlan pool_grad_plan(const KernelContext& c, const ops::SequencePool::Attrs& a) {
  using Op = ops::SequencePool;
  const LoDTensor& xt = c.in(Op::x);
  const LoDTensor& dout = c.in(Op::out_grad);
  PoolGradPlan p;
  p.seq = seq_last_level(c, Op::x, xt);
  p.S = int64_t(p.seq.size()) - 1, p.D = row_size(xt);
  c.check(dout.rank() >= 1 && dout.dim(0) == p.S && dout.numel() == p.S * p.D, "Out@GRAD {} does not fit {} sequences of rows {}", dout.shape(), p.S,
          xt.shape());
  if (a.pooltype == ops::SequencePool::PoolType::max) {
    const LoDTensor& mi = c.in(Op::max_index);
    c.check(mi.dtype() == DType::i32 && mi.numel() == p.S * p.D, "MaxIndex {} {} does not fit Out@GRAD {}", mi.shape(), name(mi.dtype()), dout.shape());
    p.max_index = &mi;
  }
  c.dispatch(type_list<float, double>{}, xt.dtype(), [](auto) {});
  p.x_grad = &c.out(Op::x_grad);
  p.x_grad->resize(xt.shape(), xt.dtype());
  return p;
}

/// An oar::Error unless MaxIndex[s, d] (host values) lies in sequence s, for every non-empty s.
inline void check_max_index(const KernelContext& c, const PoolGradPlan& p, const int32_t* idx) {
  for (int64_t s = 0; s < p.S; ++s) {
    const int64_t b = int64_t(p.seq[size_t(s)]), e = int64_t(p.seq[size_t(s) + 1]);
    if (e == b) continue;
    for (int64_t d = 0; d < p.D; ++d) {
      const int32_t i = idx[s * p.D + d];
      c.check(i >= b && i < e, "MaxIndex[{}, {}] = {} lies outside sequence {} (rows {}..{})", s, d, i, s, b, e);
    }
  }
}

}  // namespace oar::kernels
