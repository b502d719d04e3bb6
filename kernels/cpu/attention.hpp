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
