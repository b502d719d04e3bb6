// kernels/common/im2col.hpp: the window sweep that describes a convolution on every place: the CPU lays its
// column matrices out by it, and the CUDA kernels read the transposed convolution's sizes from it.
#pragma once
#include <cstdint>

namespace oar::kernels {

/// One window sweep: an image [c, h, w] seen through kh x kw windows (strides s, zero padding p, dilation d)
/// at oh x ow positions; its column matrix is [c*kh*kw, oh*ow], row (ci*kh + a)*kw + b, column i*ow + j
/// holding image[ci, i*sh - ph + a*dh, j*sw - pw + b*dw] (0 outside).
struct ConvGeom {
  int64_t c = 0, h = 0, w = 0;
  int64_t kh = 1, kw = 1;
  int64_t sh = 1, sw = 1, ph = 0, pw = 0, dh = 1, dw = 1;
  int64_t oh = 0, ow = 0;

  int64_t col_rows() const { return c * kh * kw; }
  int64_t col_cols() const { return oh * ow; }
  int64_t image_size() const { return c * h * w; }
  /// The column matrix is the image itself (1x1 window, stride 1, no padding).
  bool is_identity() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0 && oh == h && ow == w; }
};

}  // namespace oar::kernels
