// kernels/cpu/sequence_expand.hpp: sequence_expand and its grad on the CPU. Both follow one plan: where in
// Out each unit of X (a sequence, or a row when X has no LoD) starts, from Y's LoD at ref_level.
#pragma once
#include "kernels/cpu/sequence_pool.hpp"
#include "oar/ops/sequence_expand.hpp"

namespace oar::cpu_kernels {

/// Unit i of X is rows [begin(i), begin(i) + len(i)); it is copied n(i) times, the copies back to back from
/// Out row start[i]; start[units] is Out's rows.
struct ExpandPlan {
  std::span<const size_t> r;  // Y's LoD at ref_level: n(i) = r[i+1] - r[i]
  const size_t* xu;           // X's offsets, or null: unit i is row i
  const size_t* start;        // units + 1 entries (thread scratch)
  int64_t units;
  size_t begin(int64_t i) const { return xu ? xu[i] : size_t(i); }
  size_t len(int64_t i) const { return xu ? xu[i + 1] - xu[i] : 1; }
  size_t n(int64_t i) const { return r[size_t(i) + 1] - r[size_t(i)]; }
};

/// Checks X and Y of sequence_expand and plans the copies (scratch slot 60 holds start).
inline ExpandPlan expand_plan(const KernelContext& c, const LoDTensor& xt, const LoDTensor& yt, int32_t ref_level) {
  using E = ops::SequenceExpand;
  cpu_kernels::seq_last_level(c, E::y, yt);
  const int ly = yt.lod_level();
  const int ref = ref_level < 0 ? ly - 1 : ref_level;
  c.check(ref < ly, "ref_level = {} but Y ('{}') has only {} LoD levels", ref_level, c.in_name(E::y), ly);
  c.check(xt.rank() >= 1, "X ('{}') must have rows (rank >= 1), got a scalar", c.in_name(E::x));
  c.check(xt.lod_level() <= 1, "X ('{}') has {} LoD levels; sequence_expand takes X with at most 1", c.in_name(E::x), xt.lod_level());
  ExpandPlan p;
  p.r = yt.lod()[size_t(ref)];
  p.xu = xt.lod_level() == 1 ? cpu_kernels::seq_last_level(c, E::x, xt).data() : nullptr;
  p.units = xt.lod_level() == 1 ? int64_t(xt.lod()[0].size()) - 1 : xt.dim(0);
  c.check(p.units == int64_t(p.r.size()) - 1, "X ('{}') has {} {} but Y's LoD level {} has {} sequences; they must match", c.in_name(E::x), p.units,
          p.xu ? "sequences" : "rows (X has no LoD)", ref, p.r.size() - 1);
  size_t* start = thread_scratch<size_t, 60>(size_t(p.units) + 1);
  start[0] = 0;
  for (int64_t i = 0; i < p.units; ++i) start[i + 1] = start[i] + p.n(i) * p.len(i);
  p.start = start;
  return p;
}

/// What sequence_expand's kernels on every place start from: the plan, Out (checked not to be X) resized to
/// p.start[p.units] rows, and Out's LoD in a scratch LoD, to be set once Out is written.
struct ExpandForwardPlan {
  ExpandPlan p;
  LoDTensor* out;
  const LoD* lod;
};
inline ExpandForwardPlan expand_forward_plan(const KernelContext& c, const ops::SequenceExpand::Attrs& a) {
  using E = ops::SequenceExpand;
  const LoDTensor& xt = c.in(E::x);
  const ExpandPlan p = expand_plan(c, xt, c.in(E::y), a.ref_level);
  LoDTensor& ot = c.out(E::out);
  c.check(&ot != &xt, "Out cannot be X");
  LoD& lod = seq_lod_scratch(1);
  if (p.xu) {  // one sequence per copy
    lod[0].assign(1, 0);
    for (int64_t i = 0; i < p.units; ++i)
      for (size_t j = 0; j < p.n(i); ++j) lod[0].push_back(lod[0].back() + p.len(i));
  } else {  // the copies of row i are sequence i
    lod[0].assign(p.r.begin(), p.r.end());
  }
  Shape os = xt.shape();
  os[0] = int64_t(p.start[p.units]);
  ot.resize(os, xt.dtype());
  return {p, &ot, &lod};
}

/// The same for the gradient: Out@GRAD checked against Out's rows, X@GRAD resized to X's shape (f32 or f64).
struct ExpandGradPlan {
  ExpandPlan p;
  int64_t D;  ///< elements per row of X
  LoDTensor* x_grad;
};
inline ExpandGradPlan expand_grad_plan(const KernelContext& c, const ops::SequenceExpand::Attrs& a) {
  using E = ops::SequenceExpand;
  const LoDTensor& xt = c.in(E::x);
  const LoDTensor& dout = c.in(E::out_grad);
  const ExpandPlan p = expand_plan(c, xt, c.in(E::y), a.ref_level);
  const int64_t D = row_size(xt);
  c.check(dout.rank() >= 1 && dout.dim(0) == int64_t(p.start[p.units]) && dout.numel() == dout.dim(0) * D, "Out@GRAD {} does not fit Out's {} rows of X {}",
          dout.shape(), p.start[p.units], xt.shape());
  LoDTensor& dx = c.out(E::x_grad);
  c.dispatch(type_list<float, double>{}, xt.dtype(), [](auto) {});  // the dtypes both places take
  dx.resize(xt.shape(), xt.dtype());
  return {p, D, &dx};
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

/// requires: Out is not X (rows are copied from X while Out is written).
inline void SequenceExpand::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const cpu_kernels::ExpandForwardPlan plan = cpu_kernels::expand_forward_plan(c, a);
  const cpu_kernels::ExpandPlan& p = plan.p;
  LoDTensor& ot = *plan.out;
  const size_t row = size_t(cpu_kernels::row_size(xt)) * size_of(xt.dtype());
  const char* px = static_cast<const char*>(xt.raw());
  char* po = static_cast<char*>(ot.raw());
  if (row > 0)
    parallel_for(0, p.units, cpu_kernels::seq_grain(ot.numel(), p.units), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const size_t bytes = p.len(i) * row;
        for (size_t j = 0; j < p.n(i); ++j) std::memcpy(po + p.start[i] * row + j * bytes, px + p.begin(i) * row, bytes);
      }
    });
  ot.set_lod(*plan.lod);
}

/// X@GRAD unit i = the sum of Out@GRAD over unit i's copies (zeros when it has none).
inline void SequenceExpand::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  const cpu_kernels::ExpandGradPlan plan = cpu_kernels::expand_grad_plan(c, a);
  const cpu_kernels::ExpandPlan& p = plan.p;
  const int64_t D = plan.D;
  LoDTensor& dx = *plan.x_grad;
  c.dispatch(type_list<float, double>{}, xt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* pg = dout.data<T>();
    T* pd = dx.data<T>();
    parallel_for(0, p.units, cpu_kernels::seq_grain(dout.numel() + dx.numel(), p.units), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const size_t elems = p.len(i) * size_t(D);
        T* d = pd + p.begin(i) * size_t(D);
        std::fill(d, d + elems, T(0));
        for (size_t j = 0; j < p.n(i); ++j) {
          const T* g = pg + p.start[i] * size_t(D) + j * elems;
          for (size_t k = 0; k < elems; ++k) d[k] += g[k];
        }
      }
    });
  });
  dx.set_lod(xt.lod());
}

}  // namespace oar::ops
