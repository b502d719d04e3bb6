// kernels/cpu/matmul.hpp: matmul and matmul_grad on the CPU through oar::cpu_kernels::gemm / gemm_batched (stride 0 for
// a shared rank-2 operand); batches over a shared operand are folded into one tall GEMM where the layout allows.
#pragma once
#include <algorithm>

#include "kernels/cpu/gemm.hpp"
#include "oar/ops/matmul.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::cpu_kernels {

/// C_b = alpha * op(A_b) * op(B_b) for b in [0, batch); a stride of 0 shares that operand.
template <class T>
void matmul_batched(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, int64_t sa, const T* b,
                    int64_t ldb, int64_t sb, T* c, int64_t ldc, int64_t sc, int64_t batch) {
  if (batch <= 0) return;
  if (batch == 1) return gemm<T>(ta, tb, m, n, k, alpha, a, lda, b, ldb, T(0), c, ldc);
  // B shared and the A_b stacked row after row: one [batch * m, k] x [k, n] product.
  if (sb == 0 && !ta && sa == m * lda && sc == m * ldc) return gemm<T>(false, tb, batch * m, n, k, alpha, a, lda, b, ldb, T(0), c, ldc);
  gemm_batched<T>(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, T(0), c, ldc, sc, batch);
}

/// C = alpha * sum over b of op(A_b) * op(B_b): the gradient of an operand every batch shared.
template <class T>
void matmul_batch_sum(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, int64_t sa, const T* b,
                      int64_t ldb, int64_t sb, T* c, int64_t ldc, int64_t batch) {
  if (batch <= 0) {
    for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T(0));
    return;
  }
  // A_b^T B_b summed over stacked A_b [k, m] and B_b [k, n]: one [m, batch * k] x [batch * k, n] product.
  if (ta && !tb && sa == k * lda && sb == k * ldb) return gemm<T>(true, false, m, n, batch * k, alpha, a, lda, b, ldb, T(0), c, ldc);
  for (int64_t i = 0; i < batch; ++i)
    gemm<T>(ta, tb, m, n, k, alpha, a + i * sa, lda, b + i * sb, ldb, i ? T(1) : T(0), c, ldc);
}

/// The CPU's products for the matmul kernels below; kernels/cuda/nn.hpp has the same two on cuBLAS, so that
/// one kernel (ops::detail::matmul_forward / matmul_backward) plans the products for both places.
struct CpuMatmul {
  using types = type_list<float, double>;
  template <class T>
  static void batched(const KernelContext&, bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, int64_t sa,
                      const T* b, int64_t ldb, int64_t sb, T* c, int64_t ldc, int64_t sc, int64_t batch) {
    matmul_batched<T>(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, c, ldc, sc, batch);
  }
  template <class T>
  static void batch_sum(const KernelContext&, bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, int64_t sa,
                        const T* b, int64_t ldb, int64_t sb, T* c, int64_t ldc, int64_t batch) {
    matmul_batch_sum<T>(ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, c, ldc, batch);
  }
};

}  // namespace oar::cpu_kernels

namespace oar::ops {

namespace detail {
struct MatmulPlan {
  MatDesc x, y;
  int64_t batch, m, n, k, sx, sy, sout;
  Shape out;
};
inline MatmulPlan matmul_plan(const KernelContext& c, const Matmul::Attrs& a, const Tensor& x, const Tensor& y) {
  MatmulPlan p;
  bool tx = a.transpose_x, ty = a.transpose_y;
  std::string why = matmul_shape(x.shape(), y.shape(), tx, ty, p.out);
  c.check(why.empty(), "{}", why);
  c.check(x.dtype() == y.dtype(), "X is {} but Y is {}", name(x.dtype()), name(y.dtype()));
  p.x = mat_desc(x.shape(), tx, true), p.y = mat_desc(y.shape(), ty, false);
  p.batch = p.x.batch == 0 && p.y.batch == 0 ? 1 : std::max(p.x.batch, p.y.batch);  // may be 0: an empty batch
  p.m = p.x.height(), p.k = p.x.width(), p.n = p.y.width();
  p.sx = p.x.batch ? p.x.rows * p.x.cols : 0;
  p.sy = p.y.batch ? p.y.rows * p.y.cols : 0;
  p.sout = p.m * p.n;
  return p;
}
}  // namespace detail

/// Out = alpha op(X) op(Y), batched, with the products of `P` (cpu_kernels::CpuMatmul or CUDA's).
template <class P>
void matmul_forward(KernelContext& c, const Matmul::Attrs& attrs) {
  const LoDTensor& x = c.in(Matmul::x);
  const LoDTensor& y = c.in(Matmul::y);
  LoDTensor& out = c.out(Matmul::out);
  const detail::MatmulPlan p = detail::matmul_plan(c, attrs, x, y);
  const float alpha = attrs.alpha;
  c.dispatch(typename P::types{}, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    out.resize(p.out, x.dtype());
    P::template batched<T>(c, p.x.trans, p.y.trans, p.m, p.n, p.k, compute_t<T>(alpha), x.data<T>(), p.x.cols, p.sx, y.data<T>(), p.y.cols, p.sy,
                           out.data<T>(), p.n, p.sout, p.batch);
  });
}

/// With op(X) [M, K], op(Y) [K, N], dOut [M, N] per batch:
///   dX = alpha * dOut op(Y)^T  (stored transposed when transpose_X: op(Y) dOut^T)
///   dY = alpha * op(X)^T dOut  (stored transposed when transpose_Y: dOut^T op(X))
/// An operand shared by every batch gets the sum over the batch.
/// X@GRAD and Y@GRAD with the products of `P`; a shared (unbatched) operand's gradient sums over the batch.
template <class P>
void matmul_backward(KernelContext& c, const Matmul::Attrs& attrs) {
  const LoDTensor& x = c.in(Matmul::x);
  const LoDTensor& y = c.in(Matmul::y);
  const LoDTensor& dout = c.in(Matmul::out_grad);
  const detail::MatmulPlan p = detail::matmul_plan(c, attrs, x, y);
  c.check(dout.numel() == p.batch * p.m * p.n, "Out@GRAD {} does not match Out {}", dout.shape(), p.out);
  const float alpha = attrs.alpha;
  const bool tx = p.x.trans, ty = p.y.trans;
  c.dispatch(typename P::types{}, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = x.data<T>(), *py = y.data<T>(), *pd = dout.data<T>();
    const compute_t<T> a = compute_t<T>(alpha);
    if (c.has_out(Matmul::x_grad)) {
      LoDTensor& dx = c.out(Matmul::x_grad);
      dx.resize(x.shape(), x.dtype());
      T* g = dx.data<T>();
      const bool shared = p.x.batch == 0 && p.y.batch != 0;
      if (!tx) {  // [M, K] = dOut [M, N] * op(Y)^T
        if (shared) P::template batch_sum<T>(c, false, !ty, p.m, p.k, p.n, a, pd, p.n, p.sout, py, p.y.cols, p.sy, g, p.x.cols, p.batch);
        else P::template batched<T>(c, false, !ty, p.m, p.k, p.n, a, pd, p.n, p.sout, py, p.y.cols, p.sy, g, p.x.cols, p.sx, p.batch);
      } else {  // [K, M] = op(Y) [K, N] * dOut^T
        if (shared) P::template batch_sum<T>(c, ty, true, p.k, p.m, p.n, a, py, p.y.cols, p.sy, pd, p.n, p.sout, g, p.x.cols, p.batch);
        else P::template batched<T>(c, ty, true, p.k, p.m, p.n, a, py, p.y.cols, p.sy, pd, p.n, p.sout, g, p.x.cols, p.sx, p.batch);
      }
      dx.set_lod(x.lod());
    }
    if (c.has_out(Matmul::y_grad)) {
      LoDTensor& dy = c.out(Matmul::y_grad);
      dy.resize(y.shape(), y.dtype());
      T* g = dy.data<T>();
      const bool shared = p.y.batch == 0 && p.x.batch != 0;
      if (!ty) {  // [K, N] = op(X)^T [K, M] * dOut [M, N]
        if (shared) P::template batch_sum<T>(c, !tx, false, p.k, p.n, p.m, a, px, p.x.cols, p.sx, pd, p.n, p.sout, g, p.y.cols, p.batch);
        else P::template batched<T>(c, !tx, false, p.k, p.n, p.m, a, px, p.x.cols, p.sx, pd, p.n, p.sout, g, p.y.cols, p.sy, p.batch);
      } else {  // [N, K] = dOut^T [N, M] * op(X) [M, K]
        if (shared) P::template batch_sum<T>(c, true, tx, p.n, p.k, p.m, a, pd, p.n, p.sout, px, p.x.cols, p.sx, g, p.y.cols, p.batch);
        else P::template batched<T>(c, true, tx, p.n, p.k, p.m, a, pd, p.n, p.sout, px, p.x.cols, p.sx, g, p.y.cols, p.sy, p.batch);
      }
      dy.set_lod(y.lod());
    }
  });
}

inline void Matmul::eval_cpu(KernelContext& c, const Attrs& a) { matmul_forward<cpu_kernels::CpuMatmul>(c, a); }
inline void Matmul::eval_grad_cpu(KernelContext& c, const Attrs& a) { matmul_backward<cpu_kernels::CpuMatmul>(c, a); }

}  // namespace oar::ops
