// kernels/cpu/matmul.hpp: matmul and matmul_grad on the CPU through oar::cpu_kernels::gemm / gemm_batched (stride 0 for
// a shared rank-2 operand); batches over a shared operand are folded into one tall GEMM where the layout allows.
#pragma once
#include <algorithm>

#include "kernels/common/matmul.hpp"
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

/// The CPU's products for the matmul kernels of kernels/common/matmul.hpp; kernels/cuda/nn.hpp has the same two
/// on cuBLAS, so that one kernel plans the products for both places.
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

inline void Matmul::eval_cpu(KernelContext& c, const Attrs& a) { kernels::matmul_forward<cpu_kernels::CpuMatmul>(c, a); }
inline void Matmul::eval_grad_cpu(KernelContext& c, const Attrs& a) { kernels::matmul_backward<cpu_kernels::CpuMatmul>(c, a); }

}  // namespace oar::ops
