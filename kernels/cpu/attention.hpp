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

#include "kernels/common/attention.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/random_counter.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"
#include "oar/ops/attention.hpp"

namespace oar::cpu_kernels::attention {

/// Query rows and keys per tile: the tile products are GEMMs, nearer their peak rate the larger they are, and a
/// 256 x 512 tile of f32 scores (512 KB) is still a fixed amount per thread, whatever T is.
constexpr int64_t kQueryTile = 256, kKeyTile = 512;

using namespace kernels::attention;
// Declared here as well: in a header-only unit oar::Shared (tape/replay.hpp) is visible too, and the directive's
// names count as declared in namespace oar, so a bare Shared would be ambiguous.
using kernels::attention::Shared;

template <class T>
using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using CMap = Eigen::Map<const Mat<T>, 0, Eigen::OuterStride<>>;
template <class T>
using MMap = Eigen::Map<Mat<T>, 0, Eigen::OuterStride<>>;

/// The last key query row i may see (exclusive): keys [0, limit).
inline int64_t key_limit(const Shared& sh, int64_t i, int64_t tq, int64_t tk) { return sh.causal ? std::clamp<int64_t>(i + tk - tq + 1, 0, tk) : tk; }

/// Query row i's masks over keys [j0, j0 + n) applied to its scores s[0, n).
template <class T>
void mask_row(const Problem<T>& p, int64_t i, int64_t j0, int64_t n, T* s) {
  if (p.mask_add) {
    const T* m = p.mask_add + i * p.tk + j0;
    for (int64_t j = 0; j < n; ++j) s[j] += m[j];
  }
  if (p.mask_keep) {
    const bool* m = p.mask_keep + i * p.tk + j0;
    for (int64_t j = 0; j < n; ++j)
      if (!m[j]) s[j] = -std::numeric_limits<T>::infinity();
  }
}

/// Whether dropout keeps row i's weight of key j (the same draw in both passes).
template <class T>
bool kept(const Problem<T>& p, const Shared& sh, int64_t i, int64_t j) {
  return sh.rng.uniform(p.draw0 + uint64_t(i * p.tk + j)) >= sh.dropout;
}

/// What a kept weight is multiplied by: 1 / (1 - p).
template <class T>
T keep_scale(const Shared& sh) {
  return T(1.0 / (1.0 - sh.dropout));
}

/// Row i's dropout factor of key j: 0, or 1 / (1 - p).
template <class T>
T drop_factor(const Problem<T>& p, const Shared& sh, int64_t i, int64_t j) {
  return kept(p, sh, i, j) ? keep_scale<T>(sh) : T(0);
}

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
    mask_row(p, i, j0, n, row);
    const int64_t lim = key_limit(sh, i, p.tq, p.tk);
    for (int64_t b = std::max<int64_t>(lim - j0, 0); b < n; ++b) row[b] = ninf;
  }
}

/// Multiplies the weights of rows [i0, i0 + w.rows()) and keys [j0, ...) by their dropout factor (0 or 1 / (1 - p)).
template <class T>
void drop(const Problem<T>& p, const Shared& sh, int64_t i0, int64_t j0, Mat<T>& w) {
  const T keep = keep_scale<T>(sh);
  for (int64_t a = 0; a < w.rows(); ++a)
    for (int64_t b = 0; b < w.cols(); ++b) w(a, b) = kept(p, sh, i0 + a, j0 + b) ? w(a, b) * keep : T(0);
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

/// Small heads (d = dv, 8, 16 or 32) against keys that fit one tile: row by row, with the head size known to the
/// compiler so that a row's accumulators stay in registers, instead of tile GEMMs. A 100 x 100 x 16 product is
/// too small for the GEMM's packing to pay for itself, and row by row each causal row stops at its last key.
template <class T>
int small_head(const Problem<T>& p) {
  const bool fits = p.d == p.dv && p.tk <= kKeyTile && (p.d == 8 || p.d == 16 || p.d == 32);
  return fits ? int(p.d) : 0;
}

constexpr int64_t kLanes = 8;  // keys per vector step; the transposed rows are padded to a multiple of it
inline int64_t padded(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

/// X [n, D] (row stride xs) -> X^T [D, n8], zero past n: a query row's scores are then D updates of 8 keys at a time.
template <class T, int D>
void transpose_rows(const T* x, int64_t xs, int64_t n, std::vector<T>& xt) {
  const int64_t n8 = padded(n);
  xt.assign(size_t(D * n8), T(0));
  for (int64_t j = 0; j < n; ++j)
    for (int e = 0; e < D; ++e) xt[size_t(e * n8 + j)] = x[j * xs + e];
}

/// out[j] = alpha (x . X_j) for keys [0, lim), X given transposed (X^T [D, n8]); writes up to padded(lim).
template <class T, int D>
void row_dots(const T* x, const T* xt, int64_t n8, int64_t lim, T alpha, T* out) {
  for (int64_t j0 = 0; j0 < lim; j0 += kLanes) {
    T acc[kLanes] = {};
    for (int e = 0; e < D; ++e) {
      const T xe = x[e];
      const T* r = xt + e * n8 + j0;
      for (int64_t u = 0; u < kLanes; ++u) acc[u] += xe * r[u];
    }
    for (int64_t u = 0; u < kLanes; ++u) out[j0 + u] = alpha * acc[u];
  }
}

template <class T, int D>
using RowVec = Eigen::Matrix<T, 1, D>;
template <class T, int D>
using RowMap = Eigen::Map<RowVec<T, D>>;
template <class T, int D>
using CRowMap = Eigen::Map<const RowVec<T, D>>;

/// forward_rows for a small problem.
template <class T, int D>
void forward_rows_small(const Problem<T>& p, const Shared& sh, int64_t i0, int64_t i1) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  thread_local std::vector<T> kt, s;
  const int64_t n = key_limit(sh, i1 - 1, p.tq, p.tk), n8 = padded(n);
  transpose_rows<T, D>(p.k, p.ks, n, kt);
  s.resize(size_t(std::max<int64_t>(n8, 1)));
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t lim = key_limit(sh, i, p.tq, p.tk);
    T* lse = p.lse + i * p.lse_stride;
    RowMap<T, D> o(p.o + i * p.os);
    row_dots<T, D>(p.q + i * p.qs, kt.data(), n8, lim, T(sh.scale), s.data());
    mask_row(p, i, 0, lim, s.data());
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> row(s.data(), lim);
    const T m = lim > 0 ? row.maxCoeff() : ninf;
    if (m == ninf) {  // every key masked
      o.setZero();
      *lse = ninf;
      continue;
    }
    row = (row - m).exp();
    const T l = row.sum();
    RowVec<T, D> acc = RowVec<T, D>::Zero();
    if (sh.dropout > 0)
      for (int64_t j = 0; j < lim; ++j) acc += (s[size_t(j)] * drop_factor(p, sh, i, j)) * CRowMap<T, D>(p.v + j * p.vs);
    else
      for (int64_t j = 0; j < lim; ++j) acc += s[size_t(j)] * CRowMap<T, D>(p.v + j * p.vs);
    o = acc / l;
    *lse = m + std::log(l);
  }
}

/// backward for a small problem: the same formulas, one query row at a time.
template <class T, int D>
void backward_small(const Problem<T>& p, const Shared& sh) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  thread_local std::vector<T> kt, vt, s, dp, dk, dv;
  const int64_t n = p.tk, n8 = padded(n);
  transpose_rows<T, D>(p.k, p.ks, n, kt);
  transpose_rows<T, D>(p.v, p.vs, n, vt);
  s.resize(size_t(std::max<int64_t>(n8, 1)));
  dp.resize(s.size());
  dk.assign(size_t(n * D), T(0));
  dv.assign(size_t(n * D), T(0));
  const T scale = T(sh.scale);
  for (int64_t i = 0; i < p.tq; ++i) {
    RowMap<T, D> dq(p.dq + i * p.qs);
    dq.setZero();
    const T lse = p.lse[i * p.lse_stride];
    const int64_t lim = key_limit(sh, i, p.tq, p.tk);
    if (lse == ninf || lim == 0) continue;  // no key seen: no weight, no gradient
    const CRowMap<T, D> dout(p.dout + i * p.os), q(p.q + i * p.qs);
    const T delta = dout.dot(CRowMap<T, D>(p.out + i * p.os));  // dO_i . O_i = sum_j P_ij dP_ij: the softmax's correction
    row_dots<T, D>(p.q + i * p.qs, kt.data(), n8, lim, scale, s.data());
    mask_row(p, i, 0, lim, s.data());
    Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>> w(s.data(), lim);
    w = (w - lse).exp();
    row_dots<T, D>(p.dout + i * p.os, vt.data(), n8, lim, T(1), dp.data());  // dO_i V^T: the dropped weights' gradient
    RowVec<T, D> dqi = RowVec<T, D>::Zero();
    for (int64_t j = 0; j < lim; ++j) {
      const T f = sh.dropout > 0 ? drop_factor(p, sh, i, j) : T(1);
      RowMap<T, D>(dv.data() + j * D) += (s[size_t(j)] * f) * dout;
      const T ds = s[size_t(j)] * (dp[size_t(j)] * f - delta) * scale;  // dS = P (dP - delta), with the scores' scale
      dqi += ds * CRowMap<T, D>(p.k + j * p.ks);
      RowMap<T, D>(dk.data() + j * D) += ds * q;
    }
    dq = dqi;
  }
  for (int64_t j = 0; j < n; ++j) {
    std::copy_n(dk.data() + j * D, D, p.dk + j * p.ks);
    std::copy_n(dv.data() + j * D, D, p.dv_ + j * p.vs);
  }
}

/// Calls f with the small head size as a constant (8, 16, 32).
template <class F>
void with_small_head(int d, F&& f) {
  if (d == 8) f(std::integral_constant<int, 8>{});
  else if (d == 16) f(std::integral_constant<int, 16>{});
  else f(std::integral_constant<int, 32>{});
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
        const int64_t i1 = std::min(i0 + at::kQueryTile, p.tq);
        if (const int h = at::small_head(p)) at::with_small_head(h, [&](auto D) { at::forward_rows_small<T, D()>(p, pl.shared, i0, i1); });
        else at::forward_rows(p, pl.shared, i0, i1);
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
    LoDTensor *dq = c.out_if(q_grad), *dk = c.out_if(k_grad), *dvv = c.out_if(v_grad);
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
      for (int64_t i = lo; i < hi; ++i) {
        const at::Problem<T>& p = pl.problems[size_t(i)];
        if (const int h = at::small_head(p)) at::with_small_head(h, [&](auto D) { at::backward_small<T, D()>(p, pl.shared); });
        else at::backward(p, pl.shared);
      }
    });
  });
}

}  // namespace oar::ops
