// kernels/common/attention.hpp: scaled_dot_product_attention's problems laid out for the kernels of every place:
// each (batch entry or sequence, head) pair as row-major views into Q, K, V, Out and LSE, with the mask's slab,
// the dropout draws and the shared scale.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/common/sequence_pool.hpp"
#include "kernels/random_counter.hpp"
#include "oar/ops/attention.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels::attention {

/// One problem: row-major matrices given by their first row and row stride (elements).
template <class T>
struct Problem {
  const T *q, *k, *v;
  T* o = nullptr;      // forward: Out
  T* lse = nullptr;    // forward: written; backward: read
  int64_t lse_stride = 1;
  int64_t tq, tk, d, dv, qs, ks, vs, os;
  const T* mask_add = nullptr;    // [tq, tk] added to the scores
  const bool* mask_keep = nullptr;  // [tq, tk], false drops the key
  uint64_t draw0 = 0;             // the dropout draw of element (0, 0)
  // backward
  const T *dout = nullptr, *out = nullptr;
  T *dq = nullptr, *dk = nullptr, *dv_ = nullptr;
};

/// What every problem of one call shares.
struct Shared {
  double scale;
  bool causal;
  double dropout;  // 0: none
  fn::CounterRng rng{0};
};

/// The problems of one call: dense [B, H, T, d] or ragged [N, H, d] with LoD, and the mask's slab of each.
template <class T>
struct Plan {
  std::vector<Problem<T>> problems;
  Shared shared;
};

/// Lays out the problems of Q, K, V (and Mask) for the forward (o, lse) or backward pass.
template <class T>
Plan<T> plan(const KernelContext& c, const ops::ScaledDotProductAttention::Attrs& a, uint64_t seed) {
  using Op = ops::ScaledDotProductAttention;
  const LoDTensor &qt = c.in(Op::q), &kt = c.in(Op::k), &vt = c.in(Op::v);
  Plan<T> pl;
  const int r = qt.rank();
  c.check(r == 3 || r == 4, "Q must be [B, H, Tq, d] or [Nq, H, d], got {}", qt.shape());
  c.check(kt.rank() == r && vt.rank() == r, "Q, K and V must have one rank, got {}, {}, {}", qt.shape(), kt.shape(), vt.shape());
  const int64_t d = qt.dim(r - 1), dv = vt.dim(r - 1);
  c.check(kt.dim(r - 1) == d, "Q {} and K {} must have one head size", qt.shape(), kt.shape());
  pl.shared.scale = a.scale > 0 ? double(a.scale) : 1.0 / std::sqrt(double(std::max<int64_t>(d, 1)));
  pl.shared.causal = a.causal;
  pl.shared.dropout = a.is_test ? 0.0 : double(a.dropout_prob);
  pl.shared.rng = fn::CounterRng(seed);
  Problem<T> base{};
  base.q = qt.data<T>(), base.k = kt.data<T>(), base.v = vt.data<T>();
  base.d = d, base.dv = dv;
  if (r == 4) {
    const int64_t B = qt.dim(0), H = qt.dim(1), tq = qt.dim(2), tk = kt.dim(2);
    c.check(kt.dim(0) == B && kt.dim(1) == H && vt.dim(0) == B && vt.dim(1) == H && vt.dim(2) == tk,
            "dense Q [B, H, Tq, d] {}, K [B, H, Tk, d] {} and V [B, H, Tk, dv] {} must agree in B, H and Tk", qt.shape(), kt.shape(), vt.shape());
    const LoDTensor* mt = c.in_if(Op::mask);
    int64_t mb = 0, mh = 0;  // the mask's strides over b and h, in slabs (0: broadcast)
    if (mt) {
      const Shape& ms = mt->shape();
      c.check((ms.rank() == 2 || ms.rank() == 4) && ms[ms.rank() - 2] == tq && ms[ms.rank() - 1] == tk,
              "Mask {} must be [Tq, Tk] or [B|1, H|1, Tq, Tk] with Tq = {}, Tk = {}", ms, tq, tk);
      if (ms.rank() == 4) {
        c.check((ms[0] == 1 || ms[0] == B) && (ms[1] == 1 || ms[1] == H), "Mask {} must be [B or 1, H or 1, Tq, Tk] for Q {}", ms, qt.shape());
        mh = ms[1] == 1 ? 0 : 1;
        mb = ms[0] == 1 ? 0 : ms[1];
      }
      c.check(mt->dtype() == qt.dtype() || mt->dtype() == DType::boolean, "Mask must be {} or bool, got {}", name(qt.dtype()), name(mt->dtype()));
    }
    pl.problems.reserve(size_t(B * H));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h) {
        Problem<T> p = base;
        const int64_t pi = b * H + h;
        p.tq = tq, p.tk = tk;
        p.q += pi * tq * d, p.k += pi * tk * d, p.v += pi * tk * dv;
        p.qs = d, p.ks = d, p.vs = dv, p.os = dv;
        p.lse_stride = 1;
        p.draw0 = uint64_t(pi * tq * tk);
        if (mt) {
          const int64_t slab = (b * mb + h * mh) * tq * tk;
          if (mt->dtype() == DType::boolean) p.mask_keep = mt->data<bool>() + slab;
          else p.mask_add = mt->data<T>() + slab;
        }
        pl.problems.push_back(p);
      }
    return pl;
  }
  c.check(!c.has_in(Op::mask), "Mask is for dense input: LoD sequences attend within themselves");
  const std::span<const size_t> qo = seq_last_level(c, Op::q, qt), ko = seq_last_level(c, Op::k, kt);
  const int64_t H = qt.dim(1), S = int64_t(qo.size()) - 1;
  c.check(kt.dim(1) == H && vt.dim(1) == H && vt.dim(0) == kt.dim(0), "Q {}, K {} and V {} must agree in heads, and K and V in rows", qt.shape(),
          kt.shape(), vt.shape());
  c.check(int64_t(ko.size()) - 1 == S, "Q has {} sequences but K has {}: sequence s of Q attends to sequence s of K", S, int64_t(ko.size()) - 1);
  uint64_t draw = 0;
  pl.problems.reserve(size_t(S * H));
  for (int64_t s = 0; s < S; ++s)
    for (int64_t h = 0; h < H; ++h) {
      Problem<T> p = base;
      p.tq = int64_t(qo[size_t(s) + 1] - qo[size_t(s)]), p.tk = int64_t(ko[size_t(s) + 1] - ko[size_t(s)]);
      p.q += (int64_t(qo[size_t(s)]) * H + h) * d;
      p.k += (int64_t(ko[size_t(s)]) * H + h) * d;
      p.v += (int64_t(ko[size_t(s)]) * H + h) * dv;
      p.qs = H * d, p.ks = H * d, p.vs = H * dv, p.os = H * dv;
      p.lse_stride = H;
      p.draw0 = draw;
      draw += uint64_t(p.tq * p.tk);
      pl.problems.push_back(p);
    }
  return pl;
}

/// Offsets of problem i's rows in Out, LSE and the gradients, which share Q's, K's and V's layouts.
template <class T>
void place_outputs(Plan<T>& pl, const LoDTensor& qt, T* o, T* lse) {
  const int64_t d = qt.dim(qt.rank() - 1);
  for (Problem<T>& p : pl.problems) {
    const int64_t qoff = (p.q - qt.data<T>()) / d;  // Q's element offset / d: the row of Q's rows times heads
    p.o = o + qoff * p.dv;
    p.lse = lse + qoff;
  }
}

/// The forward pass's dropout seed: the fixed one, a fresh draw of the device's stream, or 0 without dropout.
inline uint64_t forward_seed(const KernelContext& c, const ops::ScaledDotProductAttention::Attrs& a) {
  return a.fix_seed ? uint64_t(uint32_t(a.seed)) : (a.is_test || a.dropout_prob == 0.f ? 0 : c.device().next_seed());
}

/// The forward pass's plan with Out (Q's shape but dv, Q's LoD) and LSE sized on the kernel's place and each
/// problem pointing into them: what both places' forward kernels start from.
template <class T>
Plan<T> forward_plan(KernelContext& c, const ops::ScaledDotProductAttention::Attrs& a, uint64_t seed) {
  using Op = ops::ScaledDotProductAttention;
  const LoDTensor& qt = c.in(Op::q);
  Plan<T> pl = plan<T>(c, a, seed);
  LoDTensor& ot = c.out(Op::out);
  Shape os = qt.shape();
  os[os.rank() - 1] = c.in(Op::v).dim(c.in(Op::v).rank() - 1);
  ot.resize(os, qt.dtype());
  ot.set_lod(qt.lod());
  LoDTensor& lt = c.out(Op::lse);
  lt.resize(qt.rank() == 4 ? Shape{qt.dim(0), qt.dim(1), qt.dim(2)} : Shape{qt.dim(0), qt.dim(1)}, qt.dtype());
  place_outputs(pl, qt, ot.data<T>(), lt.data<T>());
  return pl;
}

}  // namespace oar::kernels::attention
