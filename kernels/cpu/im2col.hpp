// kernels/cpu/im2col.hpp: the window <-> column rearrangements behind conv2d and conv2d_transpose on the CPU
// (im2col, its adjoint col2im) over the sweep of kernels/common/im2col.hpp, and the batch loop with a
// deterministic per-chunk reduction for filter gradients.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/common/im2col.hpp"
#include "kernels/cpu/scratch.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels {

using kernels::ConvGeom;

namespace detail {
/// Output columns j in [lo, hi) whose input column j*sw + off lies inside [0, w).
inline void valid_cols(const ConvGeom& g, int64_t off, int64_t& lo, int64_t& hi) {
  lo = off >= 0 ? 0 : (-off + g.sw - 1) / g.sw;
  int64_t last = g.w - 1 - off;
  hi = last < 0 ? 0 : last / g.sw + 1;
  hi = std::min(hi, g.ow);
  lo = std::min(lo, hi);
}
}  // namespace detail

/// col = im2col(img). requires: img [g.c, g.h, g.w], col [g.col_rows(), g.col_cols()] with rows `ld` apart
/// (0: g.col_cols(); a larger ld lays several images side by side), no overlap.
// GCC turns the short row copies below into `rep movs` memcpy calls, whose start-up cost dwarfs an 8-float
// row: keep them as loops.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#endif

/// Stride 1, no padding, no dilation (LeNet's and most 1-stride "valid" convs): every window row is a plain
/// shifted copy, so the loops carry no bounds logic (rows are short: 8-24 floats in LeNet).
inline bool is_dense_valid(const ConvGeom& g) {
  return g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 && g.dh == 1 && g.dw == 1 && g.oh == g.h - g.kh + 1 && g.ow == g.w - g.kw + 1;
}

/// With output rows [i0, i1) given, only their columns are written, from column 0 of each row of `col` (a
/// block of the column matrix: the convolution of a large image in pieces that stay in the cache).
template <class T>
inline void im2col(const ConvGeom& g, const T* img, T* col, int64_t ld = 0, int64_t i0 = 0, int64_t i1 = -1) {
  if (i1 < 0) i1 = g.oh;
  const int64_t plane = g.h * g.w, cols = ld > 0 ? ld : (i1 - i0) * g.ow;
  if (is_dense_valid(g)) {
    const int64_t ow = g.ow, w = g.w;
    for (int64_t ci = 0; ci < g.c; ++ci)
      for (int64_t a = 0; a < g.kh; ++a)
        for (int64_t b = 0; b < g.kw; ++b) {
          T* __restrict row = col + ((ci * g.kh + a) * g.kw + b) * cols;
          const T* __restrict src = img + ci * plane + a * w + b;
          for (int64_t i = i0; i < i1; ++i)
            for (int64_t j = 0; j < ow; ++j) row[(i - i0) * ow + j] = src[i * w + j];
        }
    return;
  }
  for (int64_t ci = 0; ci < g.c; ++ci)
    for (int64_t a = 0; a < g.kh; ++a)
      for (int64_t b = 0; b < g.kw; ++b) {
        T* row = col + ((ci * g.kh + a) * g.kw + b) * cols;
        const T* src_plane = img + ci * plane;
        const int64_t woff = b * g.dw - g.pw;
        int64_t lo, hi;
        detail::valid_cols(g, woff, lo, hi);
        for (int64_t i = i0; i < i1; ++i) {
          T* dst = row + (i - i0) * g.ow;
          const int64_t ih = i * g.sh - g.ph + a * g.dh;
          if (ih < 0 || ih >= g.h) {
            std::fill(dst, dst + g.ow, T(0));
            continue;
          }
          std::fill(dst, dst + lo, T(0));
          const T* src = src_plane + ih * g.w;
          if (g.sw == 1) {
            for (int64_t j = lo; j < hi; ++j) dst[j] = src[j + woff];  // NOTE: rows are short (8 in LeNet): a loop beats memcpy
          } else {
            for (int64_t j = lo; j < hi; ++j) dst[j] = src[j * g.sw + woff];
          }
          std::fill(dst + hi, dst + g.ow, T(0));
        }
      }
}

/// img += col2im(col), the adjoint of im2col (overlapping windows add up).
/// requires: img [g.c, g.h, g.w] (accumulated into; zero it first for a plain col2im), col as in im2col.
/// With output rows [i0, i1) given, `col` holds only their columns (as im2col writes them).
template <class T>
inline void col2im(const ConvGeom& g, const T* col, T* img, int64_t ld = 0, int64_t i0 = 0, int64_t i1 = -1) {
  if (i1 < 0) i1 = g.oh;
  const int64_t plane = g.h * g.w, cols = ld > 0 ? ld : (i1 - i0) * g.ow;
  if (is_dense_valid(g)) {
    const int64_t ow = g.ow, w = g.w;
    for (int64_t ci = 0; ci < g.c; ++ci)
      for (int64_t a = 0; a < g.kh; ++a)
        for (int64_t b = 0; b < g.kw; ++b) {
          const T* __restrict row = col + ((ci * g.kh + a) * g.kw + b) * cols;
          T* __restrict dst = img + ci * plane + a * w + b;
          for (int64_t i = i0; i < i1; ++i)
            for (int64_t j = 0; j < ow; ++j) dst[i * w + j] += row[(i - i0) * ow + j];
        }
    return;
  }
  for (int64_t ci = 0; ci < g.c; ++ci)
    for (int64_t a = 0; a < g.kh; ++a)
      for (int64_t b = 0; b < g.kw; ++b) {
        const T* row = col + ((ci * g.kh + a) * g.kw + b) * cols;
        T* dst_plane = img + ci * plane;
        const int64_t woff = b * g.dw - g.pw;
        int64_t lo, hi;
        detail::valid_cols(g, woff, lo, hi);
        for (int64_t i = i0; i < i1; ++i) {
          const int64_t ih = i * g.sh - g.ph + a * g.dh;
          if (ih < 0 || ih >= g.h) continue;
          const T* src = row + (i - i0) * g.ow;
          T* dst = dst_plane + ih * g.w;
          if (g.sw == 1) {
            for (int64_t j = lo; j < hi; ++j) dst[j + woff] += src[j];
          } else {
            for (int64_t j = lo; j < hi; ++j) dst[j * g.sw + woff] += src[j];
          }
        }
      }
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/// Images per sub-batch of a column matrix of `per_image` elements an image: about a megabyte of columns, so
/// that one GEMM covers several images (a wide N) while the columns stay in the L2 cache.
inline int64_t images_per_gemm(int64_t per_image, int64_t chunk) {
  const int64_t target = int64_t{1} << 18;
  return std::clamp<int64_t>(target / std::max<int64_t>(per_image, 1), 1, std::max<int64_t>(chunk, 1));
}

/// Runs `fn(lo, hi, acc)` over the images [0, batch) in deterministic chunks, one per thread when the batch
/// is at least the thread count (each GEMM inside then runs single-threaded), else one chunk on the caller
/// (GEMMs inside may then split themselves). `acc` is a zeroed buffer of `acc_size` elements private to the
/// chunk; the chunks' buffers are summed into `out` in chunk order (so results do not depend on timing).
/// With acc_size == 0 there is nothing to reduce and `acc` is null.
/// With `split` false the batch is one chunk on the caller, for kernels that spread the work inside it.
template <class T, class F>
inline void for_image_chunks(int64_t batch, int64_t acc_size, T* out, F&& fn, bool split = true) {
  if (batch <= 0) {
    if (acc_size > 0) std::fill(out, out + acc_size, T(0));
    return;
  }
  const int threads = oar::num_threads();
  const int64_t chunks = (split && threads > 1 && batch >= threads && !oar::in_parallel_region()) ? threads : 1;
  if (acc_size > 0) std::fill(out, out + acc_size, T(0));
  if (chunks == 1) {
    fn(int64_t(0), batch, acc_size > 0 ? out : nullptr);
    return;
  }
  // Chunk 0 accumulates straight into `out`; the others into the caller's persistent partials.
  T* partial = acc_size > 0 ? thread_scratch<T, 7>(size_t((chunks - 1) * acc_size)) : nullptr;
  oar::parallel_for(0, chunks, 1, [&](int64_t clo, int64_t chi) {
    for (int64_t ch = clo; ch < chi; ++ch) {
      const int64_t lo = batch * ch / chunks, hi = batch * (ch + 1) / chunks;
      T* acc = nullptr;
      if (acc_size > 0) {
        acc = ch == 0 ? out : partial + (ch - 1) * acc_size;
        if (ch > 0) std::fill(acc, acc + acc_size, T(0));
      }
      fn(lo, hi, acc);
    }
  });
  for (int64_t ch = 1; ch < chunks; ++ch) {
    const T* p = partial + (ch - 1) * acc_size;
    for (int64_t i = 0; i < acc_size; ++i) out[i] += p[i];
  }
}

}  // namespace oar::cpu_kernels
