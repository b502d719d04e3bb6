// kernels/cpu/sequence_pool.hpp: sequence_pool and its grad on the CPU, one sequence per task; and the LoD
// helpers every sequence kernel of ops/list_sequence.hpp shares (checked last level, scratch LoD).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>

#include "kernels/cpu/im2col.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"
#include "oar/ops/sequence_pool.hpp"

namespace oar::cpu_kernels {

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

/// Sequences per parallel_for chunk so that a chunk covers about 32K elements.
inline int64_t seq_grain(int64_t elems, int64_t seqs) { return std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(elems / std::max<int64_t>(seqs, 1), 1)); }

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

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void SequencePool::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const cpu_kernels::PoolPlan plan = cpu_kernels::pool_plan(c, a);
  const std::span<const size_t> seq = plan.seq;
  const int64_t S = plan.S, D = plan.D;
  LoDTensor& ot = *plan.out;
  const PoolType pt = a.pooltype;
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = xt.data<T>();
    T* po = ot.data<T>();
    int32_t* pi = plan.max_index;
    parallel_for(0, S, cpu_kernels::seq_grain(xt.numel(), S), [&](int64_t lo, int64_t hi) {
      for (int64_t s = lo; s < hi; ++s) {
        const int64_t b = int64_t(seq[size_t(s)]), e = int64_t(seq[size_t(s) + 1]), len = e - b;
        T* o = po + s * D;
        int32_t* idx = pi ? pi + s * D : nullptr;
        if (len == 0) {
          std::fill(o, o + D, T(0));
          if (idx) std::fill(idx, idx + D, -1);
          continue;
        }
        switch (pt) {
          case PoolType::first: std::copy(px + b * D, px + (b + 1) * D, o); break;
          case PoolType::last: std::copy(px + (e - 1) * D, px + e * D, o); break;
          case PoolType::max:
            std::copy(px + b * D, px + (b + 1) * D, o);
            if (idx) std::fill(idx, idx + D, int32_t(b));
            for (int64_t r = b + 1; r < e; ++r) {
              const T* row = px + r * D;
              for (int64_t d = 0; d < D; ++d)
                if (row[d] > o[d]) {
                  o[d] = row[d];
                  if (idx) idx[d] = int32_t(r);
                }
            }
            break;
          case PoolType::average:
          case PoolType::sum:
          case PoolType::sqrt: {
            std::copy(px + b * D, px + (b + 1) * D, o);
            for (int64_t r = b + 1; r < e; ++r) {
              const T* row = px + r * D;
              for (int64_t d = 0; d < D; ++d) o[d] += row[d];
            }
            // NOTE: a division (here and in the grad), not a product with 1 / len: s * (1 / 3) and s / 3 can
            // differ in the last bit, and a mean should be the sum over the count.
            if (pt != PoolType::sum) {
              const T div = pt == PoolType::average ? T(len) : std::sqrt(T(len));
              for (int64_t d = 0; d < D; ++d) o[d] /= div;
            }
            break;
          }
        }
      }
    });
  });
  ot.set_lod(cpu_kernels::seq_upper_levels(xt.lod()));
}

/// X@GRAD: AVERAGE / SUM / SQRT spread dout[s] (scaled by 1 / len, 1, 1 / sqrt(len)) over the sequence's rows;
/// MAX gives it to the rows MaxIndex names, LAST / FIRST to that row; the rest (and empty sequences) get 0.
inline void SequencePool::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  const cpu_kernels::PoolGradPlan plan = cpu_kernels::pool_grad_plan(c, a);
  const std::span<const size_t> seq = plan.seq;
  const int64_t S = plan.S, D = plan.D;
  const PoolType pt = a.pooltype;
  if (plan.max_index) cpu_kernels::check_max_index(c, plan, plan.max_index->data<int32_t>());
  const int32_t* pi = plan.max_index ? plan.max_index->data<int32_t>() : nullptr;
  LoDTensor& dx = *plan.x_grad;
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = dout.data<T>();
    T* pd = dx.data<T>();
    parallel_for(0, S, cpu_kernels::seq_grain(xt.numel(), S), [&](int64_t lo, int64_t hi) {
      for (int64_t s = lo; s < hi; ++s) {
        const int64_t b = int64_t(seq[size_t(s)]), e = int64_t(seq[size_t(s) + 1]), len = e - b;
        const T* g = pg + s * D;
        if (len == 0) continue;
        switch (pt) {
          case PoolType::average:
          case PoolType::sum:
          case PoolType::sqrt: {
            const T div = pt == PoolType::sum ? T(1) : pt == PoolType::average ? T(len) : std::sqrt(T(len));
            for (int64_t r = b; r < e; ++r)
              for (int64_t d = 0; d < D; ++d) pd[r * D + d] = g[d] / div;
            break;
          }
          case PoolType::first:
          case PoolType::last: {
            std::fill(pd + b * D, pd + e * D, T(0));
            const int64_t r = pt == PoolType::first ? b : e - 1;
            std::copy(g, g + D, pd + r * D);
            break;
          }
          case PoolType::max: {
            std::fill(pd + b * D, pd + e * D, T(0));
            const int32_t* idx = pi + s * D;  // checked above
            for (int64_t d = 0; d < D; ++d) pd[idx[d] * D + d] = g[d];
            break;
          }
        }
      }
    });
  });
  dx.set_lod(xt.lod());
}

}  // namespace oar::ops
