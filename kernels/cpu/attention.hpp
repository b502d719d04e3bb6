// kernels/cpu/attention.hpp: scaled_dot_product_attention and its gradient on the CPU. Each (batch entry or
// sequence, head) pair is one problem; a problem's queries go through its keys in tiles with an online softmax
// (a running maximum and sum per query row, FlashAttention's scheme), so memory beyond the inputs and outputs
// is one tile of scores per thread, whatever T is. Short problems fit one tile: the plain computation.
// The backward pass recomputes each tile's weights from the saved log-sum-exp; dropout masks come from the
// counter stream of kernels/random_counter.hpp, so nothing T x T is saved for it either.
#pragma once
#include <Eigen/Core>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/sequence_pool.hpp"  // seq_last_level
#include "kernels/random_counter.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"
#include "oar/ops/attention.hpp"

namespace oar::cpu_kernels::attention {

/// Query rows and keys per tile: the tile products are GEMMs, nearer their peak rate the larger they are, and a
/// 256 x 512 tile of f32 scores (512 KB) is still a fixed amount per thread, whatever T is.
constexpr int64_t kQueryTile = 256, kKeyTile = 512;

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

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using CMap = Eigen::Map<const Mat<T>, 0, Eigen::OuterStride<>>;
template <class T>
using MMap = Eigen::Map<Mat<T>, 0, Eigen::OuterStride<>>;

/// The last key query row i may see (exclusive): keys [0, limit).
inline int64_t key_limit(const Shared& sh, int64_t i, int64_t tq, int64_t tk) { return sh.causal ? std::clamp<int64_t>(i + tk - tq + 1, 0, tk) : tk; }

/// Scores of query rows [i0, i1) against keys [j0, j1) into s: scaled, masked (-inf where a key is dropped).
template <class T>
void scores(const Problem<T>& p, const Shared& sh, int64_t i0, int64_t i1, int64_t j0, int64_t j1, Mat<T>& s) {
  const int64_t r = i1 - i0, n = j1 - j0;
  s.resize(r, n);
  // The tile products go to gemm_serial (OpenBLAS where its kernels are the wider ones): Eigen's product of
  // these shapes ran at about half the rate (docs/attention.md).
  oar::cpu_kernels::detail::gemm_serial<T>(false, true, r, n, p.d, T(sh.scale), p.q + i0 * p.qs, p.qs, p.k + j0 * p.ks, p.ks, T(0), s.data(), n);
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  for (int64_t a = 0; a < r; ++a) {
    const int64_t i = i0 + a;
    T* row = &s(a, 0);
    if (p.mask_add) {
      const T* m = p.mask_add + i * p.tk + j0;
      for (int64_t b = 0; b < n; ++b) row[b] += m[b];
    }
    if (p.mask_keep) {
      const bool* m = p.mask_keep + i * p.tk + j0;
      for (int64_t b = 0; b < n; ++b)
        if (!m[b]) row[b] = ninf;
    }
    const int64_t lim = key_limit(sh, i, p.tq, p.tk);
    for (int64_t b = std::max<int64_t>(lim - j0, 0); b < n; ++b) row[b] = ninf;
  }
}

/// Multiplies the weights of rows [i0, i0 + w.rows()) and keys [j0, ...) by their dropout factor (0 or 1 / (1 - p)).
template <class T>
void drop(const Problem<T>& p, const Shared& sh, int64_t i0, int64_t j0, Mat<T>& w) {
  const T keep = T(1.0 / (1.0 - sh.dropout));
  for (int64_t a = 0; a < w.rows(); ++a) {
    const uint64_t n0 = p.draw0 + uint64_t((i0 + a) * p.tk + j0);
    for (int64_t b = 0; b < w.cols(); ++b) w(a, b) = sh.rng.uniform(n0 + uint64_t(b)) >= sh.dropout ? w(a, b) * keep : T(0);
  }
}

/// Forward of query rows [i0, i1) of one problem.
template <class T>
void forward_rows(const Problem<T>& p, const Shared& sh, int64_t i0, int64_t i1) {
  const int64_t r = i1 - i0;
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  thread_local Mat<T> s, acc;
  thread_local std::vector<T> m, l;
  acc.setZero(r, p.dv);
  m.assign(size_t(r), ninf);
  l.assign(size_t(r), T(0));
  const int64_t jend = key_limit(sh, i1 - 1, p.tq, p.tk);  // no later row sees past it
  for (int64_t j0 = 0; j0 < jend; j0 += kKeyTile) {
    const int64_t j1 = std::min(j0 + kKeyTile, jend);
    scores(p, sh, i0, i1, j0, j1, s);
    for (int64_t a = 0; a < r; ++a) {
      auto row = s.row(a).array();  // Eigen's exp is vectorized: the T x T exponentials are most of the non-GEMM work
      const T mnew = std::max(m[size_t(a)], row.maxCoeff());
      if (mnew == ninf) {  // nothing seen yet in this row
        row.setZero();
        continue;
      }
      const T shrink = std::exp(m[size_t(a)] - mnew);  // 0 when the row saw nothing before
      row = (row - mnew).exp();
      l[size_t(a)] = l[size_t(a)] * shrink + row.sum();
      m[size_t(a)] = mnew;
      if (shrink != T(1)) acc.row(a) *= shrink;
    }
    if (sh.dropout > 0) drop(p, sh, i0, j0, s);
    oar::cpu_kernels::detail::gemm_serial<T>(false, false, r, p.dv, j1 - j0, T(1), s.data(), j1 - j0, p.v + j0 * p.vs, p.vs, T(1), acc.data(), p.dv);
  }
  MMap<T> ot(p.o + i0 * p.os, r, p.dv, Eigen::OuterStride<>(p.os));
  for (int64_t a = 0; a < r; ++a) {
    const T sum = l[size_t(a)];
    if (sum > 0) ot.row(a) = acc.row(a) / sum;
    else ot.row(a).setZero();
    p.lse[(i0 + a) * p.lse_stride] = sum > 0 ? m[size_t(a)] + std::log(sum) : ninf;
  }
}

/// Backward of one problem: dQ, dK, dV (written whole).
template <class T>
void backward(const Problem<T>& p, const Shared& sh) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  thread_local Mat<T> s, w, dp, dkt, dvt;
  thread_local std::vector<T> delta;
  // delta_i = dO_i . O_i = sum_j P_ij dP_ij: the softmax's correction, one per query row.
  delta.resize(size_t(p.tq));
  for (int64_t i = 0; i < p.tq; ++i) {
    T acc = 0;
    const T *a = p.dout + i * p.os, *b = p.out + i * p.os;
    for (int64_t e = 0; e < p.dv; ++e) acc += a[e] * b[e];
    delta[size_t(i)] = acc;
  }
  MMap<T> dq(p.dq, p.tq, p.d, Eigen::OuterStride<>(p.qs));
  dq.setZero();
  for (int64_t j0 = 0; j0 < p.tk; j0 += kKeyTile) {
    const int64_t j1 = std::min(j0 + kKeyTile, p.tk), n = j1 - j0;
    dkt.setZero(n, p.d);
    dvt.setZero(n, p.dv);
    // The first query row that sees key j0: causal rows before it see none of this tile.
    const int64_t ifirst = sh.causal ? std::clamp<int64_t>(j0 - (p.tk - p.tq), 0, p.tq) : 0;
    for (int64_t i0 = ifirst; i0 < p.tq; i0 += kQueryTile) {
      const int64_t i1 = std::min(i0 + kQueryTile, p.tq), r = i1 - i0;
      scores(p, sh, i0, i1, j0, j1, s);
      for (int64_t a = 0; a < r; ++a) {
        const T lse = p.lse[(i0 + a) * p.lse_stride];
        if (lse == ninf) s.row(a).setZero();
        else s.row(a).array() = (s.row(a).array() - lse).exp();
      }
      const T* dot = p.dout + i0 * p.os;
      dp.resize(r, n);
      oar::cpu_kernels::detail::gemm_serial<T>(false, true, r, n, p.dv, T(1), dot, p.os, p.v + j0 * p.vs, p.vs, T(0), dp.data(), n);  // dO V^T: the dropped weights' gradient
      if (sh.dropout > 0) {
        w = s;
        drop(p, sh, i0, j0, w);
        oar::cpu_kernels::detail::gemm_serial<T>(true, false, n, p.dv, r, T(1), w.data(), n, dot, p.os, T(1), dvt.data(), p.dv);
        drop(p, sh, i0, j0, dp);  // through the same mask and factor
      } else {
        oar::cpu_kernels::detail::gemm_serial<T>(true, false, n, p.dv, r, T(1), s.data(), n, dot, p.os, T(1), dvt.data(), p.dv);
      }
      for (int64_t a = 0; a < r; ++a) s.row(a).array() *= dp.row(a).array() - delta[size_t(i0 + a)];  // dS = P (dP - delta)
      oar::cpu_kernels::detail::gemm_serial<T>(false, false, r, p.d, n, T(sh.scale), s.data(), n, p.k + j0 * p.ks, p.ks, T(1), p.dq + i0 * p.qs, p.qs);
      oar::cpu_kernels::detail::gemm_serial<T>(true, false, n, p.d, r, T(sh.scale), s.data(), n, p.q + i0 * p.qs, p.qs, T(1), dkt.data(), p.d);
    }
    MMap<T>(p.dk + j0 * p.ks, n, p.d, Eigen::OuterStride<>(p.ks)) = dkt;
    MMap<T>(p.dv_ + j0 * p.vs, n, p.dv, Eigen::OuterStride<>(p.vs)) = dvt;
  }
}

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
    const LoDTensor* mt = c.has_in(Op::mask) ? &c.in(Op::mask) : nullptr;
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

}  // namespace oar::cpu_kernels::attention

namespace oar::ops {

inline void ScaledDotProductAttention::eval_cpu(KernelContext& c, const Attrs& a) {
  namespace at = cpu_kernels::attention;
  const LoDTensor& qt = c.in(q);
  const uint64_t s = at::forward_seed(c, a);
  LoDTensor& so = c.out(seed_out);
  so.resize(Shape{1}, DType::i64);
  so.data<int64_t>()[0] = int64_t(s);
  c.dispatch(type_list<float, double>{}, qt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    at::Plan<T> pl = at::forward_plan<T>(c, a, s);
    // Work items: (problem, query tile), so that one long sequence still spreads over the threads.
    std::vector<std::pair<int32_t, int64_t>> items;
    for (size_t i = 0; i < pl.problems.size(); ++i)
      for (int64_t i0 = 0; i0 < pl.problems[i].tq; i0 += at::kQueryTile) items.push_back({int32_t(i), i0});
    parallel_for(0, int64_t(items.size()), 1, [&](int64_t lo, int64_t hi) {
      for (int64_t w = lo; w < hi; ++w) {
        const at::Problem<T>& p = pl.problems[size_t(items[size_t(w)].first)];
        const int64_t i0 = items[size_t(w)].second;
        at::forward_rows(p, pl.shared, i0, std::min(i0 + at::kQueryTile, p.tq));
      }
    });
  });
}

inline void ScaledDotProductAttention::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  namespace at = cpu_kernels::attention;
  const LoDTensor& qt = c.in(q);
  const LoDTensor& st = c.in(seed_out);
  c.check(st.numel() == 1 && st.dtype() == DType::i64, "Seed must be one int64, got {} {}", name(st.dtype()), st.shape());
  c.dispatch(type_list<float, double>{}, qt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    at::Plan<T> pl = at::plan<T>(c, a, uint64_t(st.data<int64_t>()[0]));
    const LoDTensor &ot = c.in(out), &dot = c.in(out_grad), &lt = c.in(lse);
    c.check(dot.numel() == ot.numel() && ot.numel() == qt.numel() / qt.dim(qt.rank() - 1) * c.in(v).dim(c.in(v).rank() - 1),
            "Out@GRAD {} and Out {} must have Out's shape", dot.shape(), ot.shape());
    LoDTensor *dq = c.has_out(q_grad) ? &c.out(q_grad) : nullptr, *dk = c.has_out(k_grad) ? &c.out(k_grad) : nullptr,
              *dvv = c.has_out(v_grad) ? &c.out(v_grad) : nullptr;
    // Gradients the program does not ask for still need somewhere to go: scratch of their input's shape.
    Tensor sq, sk, sv;
    auto target = [&](LoDTensor* g, const LoDTensor& like, Tensor& scratch) -> T* {
      if (g) {
        g->resize(like.shape(), like.dtype());
        g->set_lod(like.lod());
        return g->data<T>();
      }
      scratch = Tensor(like.shape(), like.dtype(), cpu());
      return scratch.data<T>();
    };
    T* gq = target(dq, qt, sq);
    T* gk = target(dk, c.in(k), sk);
    T* gv = target(dvv, c.in(v), sv);
    const T *q0 = qt.data<T>(), *k0 = c.in(k).data<T>(), *v0 = c.in(v).data<T>();
    const int64_t d = qt.dim(qt.rank() - 1);
    for (at::Problem<T>& p : pl.problems) {
      const int64_t qoff = p.q - q0;
      p.out = ot.data<T>() + qoff / d * p.dv;
      p.dout = dot.data<T>() + qoff / d * p.dv;
      p.lse = const_cast<T*>(lt.data<T>()) + qoff / d;
      p.dq = gq + qoff;
      p.dk = gk + (p.k - k0);
      p.dv_ = gv + (p.v - v0);
    }
    parallel_for(0, int64_t(pl.problems.size()), 1, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) at::backward(pl.problems[size_t(i)], pl.shared);
    });
  });
}

}  // namespace oar::ops
