// kernels/common/sequence_expand.hpp: the one plan both sequence_expand kernels and their gradients follow on
// every place: where in Out each unit of X starts, from Y's LoD at ref_level.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/common/scratch.hpp"
#include "kernels/common/sequence_pool.hpp"
#include "oar/ops/sequence_expand.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

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
  seq_last_level(c, E::y, yt);
  const int ly = yt.lod_level();
  const int ref = ref_level < 0 ? ly - 1 : ref_level;
  c.check(ref < ly, "ref_level = {} but Y ('{}') has only {} LoD levels", ref_level, c.in_name(E::y), ly);
  c.check(xt.rank() >= 1, "X ('{}') must have rows (rank >= 1), got a scalar", c.in_name(E::x));
  c.check(xt.lod_level() <= 1, "X ('{}') has {} LoD levels; sequence_expand takes X with at most 1", c.in_name(E::x), xt.lod_level());
  ExpandPlan p;
  p.r = yt.lod()[size_t(ref)];
  p.xu = xt.lod_level() == 1 ? seq_last_level(c, E::x, xt).data() : nullptr;
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

}  // namespace oar::kernels
