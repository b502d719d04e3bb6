// kernels/cpu/conv_im2col.hpp: convolution as im2col + GEMM, forward and both gradients. Several images' column
// matrices lie side by side, col [groups * k, nb * cols] with image b in columns b*cols.., so that each group's
// GEMM has a wide N (LeNet-sized layers have small per-image products) and the filter gradient is one GEMM with
// a long K per sub-batch. A 1x1 window at stride 1 without padding needs no column matrix: its GEMMs read the
// images in place. Images spread over the pool.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/im2col.hpp"

namespace oar::cpu_kernels {

/// dst[0, n) = act(src + bias[r]) (a plain copy without bias; src may be dst): how a convolution stores a row of
/// output channel r, with the same float operations elementwise_add and relu would do.
template <class T>
inline void store_output(const T* src, T* dst, int64_t n, const T* bias, int64_t r, bool relu) {
  if (!bias) {
    if (src != dst) std::copy_n(src, n, dst);
    return;
  }
  const T br = bias[r];
  if (relu)
    for (int64_t q = 0; q < n; ++q) {
      const T v = src[q] + br;
      dst[q] = v > T(0) ? v : T(0);  // NaN -> 0, as fn::Relu
    }
  else
    for (int64_t q = 0; q < n; ++q) dst[q] = src[q] + br;
}

/// Whether the images themselves are the column matrices (1x1 window, stride 1, no padding) and an image's
/// GEMM is wide enough on its own (below 128 columns, side-by-side copies of several images run faster).
inline bool conv_reads_images_in_place(const ConvGeom& g) { return g.is_identity() && g.col_cols() >= 128; }

/// Output rows per block of an image whose column matrix is larger than 4 MB, about a megabyte of columns a
/// block; 0 for smaller images, which are built whole (and batched by images_per_gemm). NOTE: ResNet-18's stem
/// (147 x 12544 floats an image) built whole went through memory twice per image and ran only 1.4x faster
/// on 2 threads than on one (1.9x in blocks); its 64 x 56 stride-2 layer (1.8 MB an image) ran 10% slower in
/// blocks (narrower GEMMs).
inline int64_t conv_rows_per_block(const ConvGeom& g) {
  const int64_t per_row = g.col_rows() * g.ow, target = int64_t{1} << 18;
  return per_row * g.oh <= 4 * target ? 0 : std::max<int64_t>(1, target / std::max<int64_t>(per_row, 1));
}

/// out [n, m, oh, ow] = act(conv(x [n, c, h, w], w [m, c / groups, kh, kw]) + bias); bias may be null.
template <class T>
void im2col_conv2d(const ConvGeom& g, int64_t n, int64_t m, int64_t groups, const T* x, const T* w, T* out, const T* bias, bool relu) {
  const int64_t mg = m / groups, k = g.col_rows() / groups, cols = g.col_cols();
  if (conv_reads_images_in_place(g)) {
    for_image_chunks<T>(n, 0, nullptr, [&](int64_t lo, int64_t hi, T*) {
      for (int64_t b = lo; b < hi; ++b) {
        const T* xb = x + b * g.image_size();
        T* ob = out + b * m * cols;
        for (int64_t gi = 0; gi < groups; ++gi)
          gemm<T>(false, false, mg, cols, k, T(1), w + gi * mg * k, k, xb + gi * k * cols, cols, T(0), ob + gi * mg * cols, cols);
        if (bias)
          for (int64_t r = 0; r < m; ++r) store_output(ob + r * cols, ob + r * cols, cols, bias, r, relu);
      }
    });
    return;
  }
  if (const int64_t rb = conv_rows_per_block(g)) {  // large images: blocks of output rows, GEMMs straight into out
    for_image_chunks<T>(n, 0, nullptr, [&](int64_t lo, int64_t hi, T*) {
      T* col = thread_scratch<T, 0>(size_t(g.col_rows() * rb * g.ow));
      for (int64_t b = lo; b < hi; ++b)
        for (int64_t i0 = 0; i0 < g.oh; i0 += rb) {
          const int64_t i1 = std::min(g.oh, i0 + rb), nc = (i1 - i0) * g.ow;
          T* ob = out + b * m * cols + i0 * g.ow;
          im2col(g, x + b * g.image_size(), col, nc, i0, i1);
          for (int64_t gi = 0; gi < groups; ++gi)
            gemm<T>(false, false, mg, nc, k, T(1), w + gi * mg * k, k, col + gi * k * nc, nc, T(0), ob + gi * mg * cols, cols);
          if (bias)
            for (int64_t r = 0; r < m; ++r) store_output(ob + r * cols, ob + r * cols, nc, bias, r, relu);
        }
    });
    return;
  }
  for_image_chunks<T>(n, 0, nullptr, [&](int64_t lo, int64_t hi, T*) {
    const int64_t per = images_per_gemm(g.col_rows() * cols, hi - lo);
    T* col = thread_scratch<T, 0>(size_t(g.col_rows() * per * cols));
    T* prod = thread_scratch<T, 1>(size_t(m * per * cols));
    for (int64_t i0 = lo; i0 < hi; i0 += per) {
      const int64_t nb = std::min(per, hi - i0), ld = nb * cols;
      for (int64_t b = 0; b < nb; ++b) im2col(g, x + (i0 + b) * g.image_size(), col + b * cols, ld);
      for (int64_t gi = 0; gi < groups; ++gi)  // prod rows gi*mg.. = W_g col_g
        gemm<T>(false, false, mg, ld, k, T(1), w + gi * mg * k, k, col + gi * k * ld, ld, T(0), prod + gi * mg * ld, ld);
      for (int64_t b = 0; b < nb; ++b)
        for (int64_t r = 0; r < m; ++r) store_output(prod + r * ld + b * cols, out + ((i0 + b) * m + r) * cols, cols, bias, r, relu);
    }
  });
}

/// The gradients of im2col_conv2d (no bias, identity) for dy [n, m, oh, ow]: dx [n, c, h, w] and dw [m, c / groups,
/// kh, kw], either may be null, written (not accumulated). The filter gradient is reduced over the images in a
/// fixed order (for_image_chunks), so it does not depend on timing.
template <class T>
void im2col_conv2d_grad(const ConvGeom& g, int64_t n, int64_t m, int64_t groups, const T* x, const T* w, const T* dy, T* dx, T* dw) {
  const int64_t mg = m / groups, k = g.col_rows() / groups, cols = g.col_cols();
  if (conv_reads_images_in_place(g)) {  // dW_g += dY_g X_g^T, dX_g = W_g^T dY_g, image by image
    for_image_chunks<T>(n, dw ? m * k : 0, dw, [&](int64_t lo, int64_t hi, T* acc) {
      for (int64_t b = lo; b < hi; ++b) {
        const T* dyb = dy + b * m * cols;
        for (int64_t gi = 0; gi < groups; ++gi) {
          if (acc)
            gemm<T>(false, true, mg, k, cols, T(1), dyb + gi * mg * cols, cols, x + b * g.image_size() + gi * k * cols, cols, T(1), acc + gi * mg * k, k);
          if (dx)
            gemm<T>(true, false, k, cols, mg, T(1), w + gi * mg * k, k, dyb + gi * mg * cols, cols, T(0), dx + b * g.image_size() + gi * k * cols, cols);
        }
      }
    });
    return;
  }
  if (const int64_t rb = conv_rows_per_block(g)) {  // large images: blocks of output rows, dOut read in place
    for_image_chunks<T>(n, dw ? m * k : 0, dw, [&](int64_t lo, int64_t hi, T* acc) {
      T* col = thread_scratch<T, 0>(size_t(g.col_rows() * rb * g.ow));
      for (int64_t b = lo; b < hi; ++b) {
        T* dxb = dx ? dx + b * g.image_size() : nullptr;
        if (dxb) std::fill(dxb, dxb + g.image_size(), T(0));
        for (int64_t i0 = 0; i0 < g.oh; i0 += rb) {
          const int64_t i1 = std::min(g.oh, i0 + rb), nc = (i1 - i0) * g.ow;
          const T* dyb = dy + b * m * cols + i0 * g.ow;
          if (acc) {
            im2col(g, x + b * g.image_size(), col, nc, i0, i1);
            for (int64_t gi = 0; gi < groups; ++gi)
              gemm<T>(false, true, mg, k, nc, T(1), dyb + gi * mg * cols, cols, col + gi * k * nc, nc, T(1), acc + gi * mg * k, k);
          }
          if (dxb) {
            for (int64_t gi = 0; gi < groups; ++gi)
              gemm<T>(true, false, k, nc, mg, T(1), w + gi * mg * k, k, dyb + gi * mg * cols, cols, T(0), col + gi * k * nc, nc);
            col2im(g, col, dxb, nc, i0, i1);
          }
        }
      }
    });
    return;
  }
  // dOut of a sub-batch gathered to dbuf [m, nb*cols]; per group: dW_g += dOut_g col_g^T,
  // dcol_g = W_g^T dOut_g; then col2im per image.
  for_image_chunks<T>(n, dw ? m * k : 0, dw, [&](int64_t lo, int64_t hi, T* acc) {
    const int64_t per = images_per_gemm(g.col_rows() * cols, hi - lo);
    T* col = thread_scratch<T, 0>(size_t(g.col_rows() * per * cols));
    T* dbuf = thread_scratch<T, 1>(size_t(m * per * cols));
    for (int64_t i0 = lo; i0 < hi; i0 += per) {
      const int64_t nb = std::min(per, hi - i0), ld = nb * cols;
      for (int64_t b = 0; b < nb; ++b)
        for (int64_t r = 0; r < m; ++r) std::copy_n(dy + ((i0 + b) * m + r) * cols, cols, dbuf + r * ld + b * cols);
      if (acc) {
        for (int64_t b = 0; b < nb; ++b) im2col(g, x + (i0 + b) * g.image_size(), col + b * cols, ld);
        for (int64_t gi = 0; gi < groups; ++gi)
          gemm<T>(false, true, mg, k, ld, T(1), dbuf + gi * mg * ld, ld, col + gi * k * ld, ld, T(1), acc + gi * mg * k, k);
      }
      if (dx) {
        for (int64_t gi = 0; gi < groups; ++gi)
          gemm<T>(true, false, k, ld, mg, T(1), w + gi * mg * k, k, dbuf + gi * mg * ld, ld, T(0), col + gi * k * ld, ld);
        for (int64_t b = 0; b < nb; ++b) {
          T* dxi = dx + (i0 + b) * g.image_size();
          std::fill(dxi, dxi + g.image_size(), T(0));
          col2im(g, col + b * cols, dxi, ld);
        }
      }
    }
  });
}

}  // namespace oar::cpu_kernels
