// kernels/cpu/gemm.hpp - row-major GEMM used by mul/matmul/fc/conv (float, double).
// OAR_WITH_BLAS and an AVX2 OpenBLAS kernel: single-threaded cblas_?gemm per block, blocks spread over
// oar::parallel_for (blas_preferred() says when).
// Otherwise: Eigen Map-based product, also split over oar::parallel_for.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "oar/device/thread_pool.hpp"

#include <Eigen/Core>
#include <cctype>
#include <cstdlib>
#include <cstring>
#if defined(OAR_WITH_BLAS)
#include <cblas.h>
#endif

namespace oar::cpu_kernels {

namespace detail {

// Products smaller than this many multiply-adds run as one call on the calling thread: below it the
// hand-off to the pool costs more than a second core gains.
inline constexpr int64_t gemm_parallel_min_work = int64_t{2} * 128 * 128 * 128;

// How a single product is split across threads.
enum class gemm_split { none, cols, rows, auto_ };

// Whether OpenBLAS runs a kernel at least as wide as Eigen's product compiled here. NOTE: Debian's OpenBLAS
// 0.3.21 does not recognise recent CPUs and falls back to its SSE3 "Prescott" kernels, far slower than
// Eigen's product compiled for the machine; and where OPENBLAS_CORETYPE asks an AVX-512 CPU for the AVX2
// kernels (Haswell, Zen), Eigen's AVX-512 product is faster (docs/benchmarks.md). Then oar uses Eigen.
// OAR_GEMM=blas or OAR_GEMM=eigen forces a path.
inline bool blas_preferred() {
#if defined(OAR_WITH_BLAS)
  static const bool fast = [] {
    if (const char* env = std::getenv("OAR_GEMM")) return std::string(env) != "eigen";
    (void)oar::num_threads();  // pool init forces OpenBLAS single-threaded
    std::string core = openblas_get_corename() ? openblas_get_corename() : "";
    for (auto& ch : core) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    for (const char* wide : {"skylakex", "cooperlake", "sapphirerapids"})
      if (core == wide) return true;
#if defined(EIGEN_VECTORIZE_AVX512)
    return false;
#else
    return core == "haswell" || core == "zen";
#endif
  }();
  return fast;
#else
  return false;
#endif
}

// One serial GEMM on a sub-block. Sizes are > 0 here.
template <class T>
inline void gemm_serial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha,
                        const T* a, int64_t lda, const T* b, int64_t ldb, T beta, T* c,
                        int64_t ldc) {
#if defined(OAR_WITH_BLAS)
  if (blas_preferred()) {
  // A leading dimension is meaningless for a single stored row; BLAS still validates it.
  const int64_t a_cols = trans_a ? m : k, b_cols = trans_b ? k : n;
  if ((trans_a ? k : m) == 1) lda = std::max(lda, a_cols);
  if ((trans_b ? n : k) == 1) ldb = std::max(ldb, b_cols);
  if (m == 1) ldc = std::max(ldc, n);
  const auto ta = trans_a ? CblasTrans : CblasNoTrans;
  const auto tb = trans_b ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                beta, c, static_cast<int>(ldc));
  } else {
    cblas_dgemm(CblasRowMajor, ta, tb, static_cast<int>(m), static_cast<int>(n),
                static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
                beta, c, static_cast<int>(ldc));
  }
  return;
  }
#endif
  using mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using cmap = Eigen::Map<const mat, Eigen::Unaligned, Eigen::OuterStride<>>;
  using map = Eigen::Map<mat, Eigen::Unaligned, Eigen::OuterStride<>>;
  map cm(c, m, n, Eigen::OuterStride<>(ldc));
  if (beta == T(0)) {
    cm.setZero();  // never read C: it may hold NaN garbage
  } else if (beta != T(1)) {
    cm *= beta;
  }
  cmap am(a, trans_a ? k : m, trans_a ? m : k, Eigen::OuterStride<>(lda));
  cmap bm(b, trans_b ? n : k, trans_b ? k : n, Eigen::OuterStride<>(ldb));
  if (!trans_a && !trans_b) {
    cm.noalias() += alpha * am * bm;
  } else if (trans_a && !trans_b) {
    cm.noalias() += alpha * am.transpose() * bm;
  } else if (!trans_a && trans_b) {
    cm.noalias() += alpha * am * bm.transpose();
  } else {
    cm.noalias() += alpha * am.transpose() * bm.transpose();
  }
}

// C = beta*C for k == 0 (beta == 0 writes zeros without reading C).
template <class T>
inline void scale_c(int64_t m, int64_t n, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    T* row = c + i * ldc;
    if (beta == T(0)) {
      std::fill(row, row + n, T(0));
    } else if (beta != T(1)) {
      for (int64_t j = 0; j < n; ++j) row[j] *= beta;
    }
  }
}

// Column-panel width multiple for splitting N: one AVX2 register of T, fine enough that a narrow N splits
// evenly (the MLP's 200 columns go 104 / 96 over two threads; 64-float panels would give 128 / 72).
template <class T>
inline constexpr int64_t gemm_col_align = 32 / sizeof(T);
template <class T>
inline constexpr int64_t gemm_row_align = 16;

template <class T>
inline void gemm_impl(gemm_split split, int64_t align, bool trans_a, bool trans_b, int64_t m,
                      int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
                      int64_t ldb, T beta, T* c, int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == T(0)) {
    scale_c(m, n, beta, c, ldc);
    return;
  }
  const int threads = oar::num_threads();
  if (split == gemm_split::auto_)
    split = n >= m ? gemm_split::cols : gemm_split::rows;
  if (threads == 1 || oar::in_parallel_region() || m * n * k < gemm_parallel_min_work)
    split = gemm_split::none;
  if (split == gemm_split::cols) {
    if (align <= 0) align = gemm_col_align<T>;
    const int64_t blocks = (n + align - 1) / align;
    if (blocks < 2) split = gemm_split::none;
    else {
      oar::parallel_for(0, blocks, 1, [&](int64_t lo, int64_t hi) {
        const int64_t j0 = lo * align, j1 = std::min(n, hi * align);
        const T* bj = trans_b ? b + j0 * ldb : b + j0;
        gemm_serial<T>(trans_a, trans_b, m, j1 - j0, k, alpha, a, lda, bj, ldb, beta, c + j0, ldc);
      });
      return;
    }
  } else if (split == gemm_split::rows) {
    if (align <= 0) align = gemm_row_align<T>;
    const int64_t blocks = (m + align - 1) / align;
    if (blocks < 2) split = gemm_split::none;
    else {
      oar::parallel_for(0, blocks, 1, [&](int64_t lo, int64_t hi) {
        const int64_t i0 = lo * align, i1 = std::min(m, hi * align);
        const T* ai = trans_a ? a + i0 : a + i0 * lda;
        gemm_serial<T>(trans_a, trans_b, i1 - i0, n, k, alpha, ai, lda, b, ldb, beta,
                       c + i0 * ldc, ldc);
      });
      return;
    }
  }
  gemm_serial<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace detail

// Row-major C(m x n) = alpha * op(A) * op(B) + beta * C, op(X) = X or X^T.
// A is m x k (k x m when trans_a), B is k x n (n x k when trans_b), leading dims in elements.
// beta == 0 never reads C; k == 0 gives C = beta * C. T is float or double.
template <class T>
inline void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                 int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "gemm: float or double");
  detail::gemm_impl<T>(detail::gemm_split::auto_, 0, trans_a, trans_b, m, n, k, alpha, a, lda, b,
                       ldb, beta, c, ldc);
}

// Strided batch: for i in [0, batch): gemm on (a + i*stride_a, b + i*stride_b, c + i*stride_c).
// stride_a or stride_b may be 0 (broadcast); C blocks must not overlap.
template <class T>
inline void gemm_batched(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha,
                         const T* a, int64_t lda, int64_t stride_a, const T* b, int64_t ldb,
                         int64_t stride_b, T beta, T* c, int64_t ldc, int64_t stride_c,
                         int64_t batch) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "gemm: float or double");
  if (batch <= 0 || m <= 0 || n <= 0) return;
  const int threads = oar::num_threads();
  // Few big products: parallelize inside each one instead of over the batch.
  if (batch == 1 || (batch < threads && m * n * k >= detail::gemm_parallel_min_work)) {
    for (int64_t i = 0; i < batch; ++i)
      gemm<T>(trans_a, trans_b, m, n, k, alpha, a + i * stride_a, lda, b + i * stride_b, ldb, beta,
              c + i * stride_c, ldc);
    return;
  }
  // Group enough products per chunk that each chunk does >= gemm_parallel_min_work.
  const int64_t work = std::max<int64_t>(1, m * n * std::max<int64_t>(k, 1));
  const int64_t grain = std::max<int64_t>(1, detail::gemm_parallel_min_work / work);
  oar::parallel_for(0, batch, grain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i)
      detail::gemm_impl<T>(detail::gemm_split::none, 0, trans_a, trans_b, m, n, k, alpha,
                           a + i * stride_a, lda, b + i * stride_b, ldb, beta, c + i * stride_c,
                           ldc);
  });
}

// ---- A right operand packed once for many products (a recurrent weight, multiplied by every time step's rows).
// gemm() packs both operands on every call, a large share of a product as small as an LSTM step's [32, 128] x
// [128, 512]. Packed once, B lives as column panels of packed_panel<T> values, k rows each, zero-padded at the
// right edge, and a register-blocked kernel (packed_rows rows x 2 vectors of accumulators) streams each panel.
namespace packed {
#if defined(__AVX512F__)
inline constexpr int vector_bytes = 64;
inline constexpr int rows = 8;
#else
inline constexpr int vector_bytes = 32;
inline constexpr int rows = 6;
#endif
/// Whether callers should prefer gemm_packed to gemm() for step-sized products: with AVX-512, or AVX2 and FMA,
/// it beat gemm() on Eigen and on OpenBLAS's kernels for an LSTM's per-step products (docs/benchmarks.md).
/// Without them the 32-byte vectors would be emulated. gemm_packed itself is correct everywhere.
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
inline constexpr bool preferred = true;
#else
inline constexpr bool preferred = false;
#endif

template <class T> struct vec { typedef T type __attribute__((vector_size(vector_bytes))); };
template <class T> using V = typename vec<T>::type;
template <class T> inline constexpr int64_t lanes = vector_bytes / int64_t(sizeof(T));
template <class T> inline constexpr int64_t panel = 2 * lanes<T>;

template <class T>
inline V<T> load(const T* p) {
  V<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class T>
inline void store(T* p, V<T> v) { std::memcpy(p, &v, sizeof v); }

// C[R rows, w <= panel columns] += A[R, k] x one panel.
template <class T, int R>
inline void block(int64_t k, const T* __restrict a, int64_t lda, const T* __restrict bp, T* __restrict c, int64_t ldc, int64_t w) {
  V<T> lo[R], hi[R];
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = V<T>{};
  for (int64_t kk = 0; kk < k; ++kk) {
    const V<T> b0 = load(bp + kk * panel<T>), b1 = load(bp + kk * panel<T> + lanes<T>);
    for (int r = 0; r < R; ++r) {
      const V<T> av = a[r * lda + kk] - V<T>{};  // broadcast
      lo[r] += av * b0;
      hi[r] += av * b1;
    }
  }
  for (int r = 0; r < R; ++r) {
    T* cr = c + r * ldc;
    if (w == panel<T>) {
      store(cr, load(cr) + lo[r]);
      store(cr + lanes<T>, load(cr + lanes<T>) + hi[r]);
    } else {
      T sum[panel<T>];
      store(sum, lo[r]);
      store(sum + lanes<T>, hi[r]);
      for (int64_t j = 0; j < w; ++j) cr[j] += sum[j];
    }
  }
}
// The last m % rows rows, with a kernel of exactly that many.
template <class T, int R = rows - 1>
inline void tail(int64_t m, int64_t k, const T* a, int64_t lda, const T* bp, T* c, int64_t ldc, int64_t w) {
  if constexpr (R > 0) {
    if (m == R) block<T, R>(k, a, lda, bp, c, ldc, w);
    else tail<T, R - 1>(m, k, a, lda, bp, c, ldc, w);
  }
}
}  // namespace packed

/// Values pack_rhs writes for a k x n right operand.
template <class T>
inline size_t packed_rhs_size(int64_t k, int64_t n) {
  return size_t((n + packed::panel<T> - 1) / packed::panel<T> * packed::panel<T> * k);
}
/// Packs op(B) [k, n] (B row-major with leading dimension ldb; [n, k] when trans_b) for gemm_packed.
template <class T>
inline void pack_rhs(bool trans_b, const T* b, int64_t ldb, int64_t k, int64_t n, T* out) {
  constexpr int64_t p = packed::panel<T>;
  for (int64_t j0 = 0; j0 < n; j0 += p) {
    const int64_t w = std::min(p, n - j0);
    for (int64_t kk = 0; kk < k; ++kk, out += p) {
      if (trans_b)
        for (int64_t j = 0; j < w; ++j) out[j] = b[(j0 + j) * ldb + kk];
      else
        std::memcpy(out, b + kk * ldb + j0, size_t(w) * sizeof(T));
      std::fill(out + w, out + p, T(0));
    }
  }
}
/// C[m, n] += A[m, k] op(B), op(B) packed by pack_rhs; column panels split over threads as gemm() would split.
template <class T>
inline void gemm_packed(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* bp, T* c, int64_t ldc) {
  constexpr int64_t p = packed::panel<T>;
  constexpr int r = packed::rows;
  const auto panels = [&](int64_t lo, int64_t hi) {
    for (int64_t q = lo; q < hi; ++q) {
      const int64_t j0 = q * p, w = std::min(p, n - j0);
      const T* bq = bp + q * p * k;
      int64_t i = 0;
      for (; i + r <= m; i += r) packed::block<T, r>(k, a + i * lda, lda, bq, c + i * ldc + j0, ldc, w);
      if (i < m) packed::tail<T>(m - i, k, a + i * lda, lda, bq, c + i * ldc + j0, ldc, w);
    }
  };
  const int64_t count = (n + p - 1) / p;
  if (m * n * k >= detail::gemm_parallel_min_work && count > 1 && oar::num_threads() > 1 && !oar::in_parallel_region())
    oar::parallel_for(0, count, 1, panels);
  else
    panels(0, count);
}

// Name of the backend, e.g. "openblas (Haswell)" or "eigen".
inline std::string gemm_backend_name() {
#if defined(OAR_WITH_BLAS)
  (void)oar::num_threads();  // pool init forces OpenBLAS single-threaded
  const char* core = openblas_get_corename();
  std::string blas = std::string("openblas (") + (core ? core : "unknown") + ")";
  return detail::blas_preferred() ? blas : "eigen (" + blas + " not used: its kernel is narrower)";
#else
  return "eigen";
#endif
}

}  // namespace oar::cpu_kernels
