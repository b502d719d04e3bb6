// kernels/cpu/conv2d.hpp: conv2d and conv2d_grad on the CPU: per image, im2col then one GEMM per group
// (a 1x1, stride-1, unpadded conv uses the image as its column matrix), images spread over the thread pool.
#pragma once
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/im2col.hpp"
#include "oar/ops/conv2d.hpp"
#include "oar/runtime/kernel_context.hpp"

namespace oar::ops {

namespace detail {

/// The window sweep of a conv-like op from its attributes: the image is `img` [N, C, H, W] (checked rank 4),
/// the window kh x kw; oh/ow are left to the caller.
inline cpu::ConvGeom conv_geom(const KernelContext& c, const Shape& img, int64_t kh, int64_t kw) {
  auto s = c.attr<std::vector<int32_t>>("strides");
  auto p = c.attr<std::vector<int32_t>>("paddings");
  auto d = c.attr<std::vector<int32_t>>("dilations");
  cpu::ConvGeom g;
  g.c = img[1], g.h = img[2], g.w = img[3], g.kh = kh, g.kw = kw;
  g.sh = s[0], g.sw = s[1], g.ph = p[0], g.pw = p[1], g.dh = d[0], g.dw = d[1];
  return g;
}

/// Checks Input/Filter at run time (their shapes may have been partly unknown when the op was built) and
/// returns the sweep of Input with the output size set.
inline cpu::ConvGeom conv2d_geom(const KernelContext& c, const Shape& x, const Shape& f) {
  int64_t groups = c.attr<int32_t>("groups");
  c.check(x.rank() == 4 && f.rank() == 4, "Input {} and Filter {} must both be rank 4", x, f);
  c.check(x[1] == f[1] * groups && f[0] % groups == 0, "Input {} has {} channels but Filter {} with groups = {} expects {} (and M a multiple of groups)",
          x, x[1], f, groups, f[1] * groups);
  cpu::ConvGeom g = conv_geom(c, x, f[2], f[3]);
  g.oh = conv_out_size(g.h, g.kh, g.ph, g.sh, g.dh);
  g.ow = conv_out_size(g.w, g.kw, g.pw, g.sw, g.dw);
  c.check(g.oh > 0 && g.ow > 0, "output size [{}, {}] <= 0 for Input {} and Filter {}", g.oh, g.ow, x, f);
  return g;
}

}  // namespace detail

inline void Conv2d::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("Input");
  const LoDTensor& f = c.in("Filter");
  LoDTensor& out = c.out("Output");
  const cpu::ConvGeom g = detail::conv2d_geom(c, x.shape(), f.shape());
  const int64_t n = x.dim(0), m = f.dim(0), groups = c.attr<int32_t>("groups");
  const int64_t mg = m / groups, k = g.col_rows() / groups, cols = g.col_cols();
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    out.resize({n, m, g.oh, g.ow}, x.dtype());
    const T* xp = x.data<T>();
    const T* wp = f.data<T>();
    T* op = out.data<T>();
    const bool direct = g.is_identity();
    if (groups == 1 && !direct) {
      // Several images per GEMM: col [k, nb*cols] (image b in columns b*cols..), out_b = W col_b taken from
      // the product's column block b.
      cpu::for_image_chunks<T>(n, 0, nullptr, [&](int64_t lo, int64_t hi, T*) {
        const int64_t per = cpu::images_per_gemm(k * cols, hi - lo);
        T* col = cpu::thread_scratch<T, 0>(size_t(k * per * cols));
        T* prod = cpu::thread_scratch<T, 1>(size_t(m * per * cols));
        for (int64_t i0 = lo; i0 < hi; i0 += per) {
          const int64_t nb = std::min(per, hi - i0), ld = nb * cols;
          for (int64_t b = 0; b < nb; ++b) cpu::im2col(g, xp + (i0 + b) * g.image_size(), col + b * cols, ld);
          cpu::gemm<T>(false, false, m, ld, k, T(1), wp, k, col, ld, T(0), prod, ld);
          for (int64_t b = 0; b < nb; ++b)
            for (int64_t r = 0; r < m; ++r) std::copy_n(prod + r * ld + b * cols, cols, op + ((i0 + b) * m + r) * cols);
        }
      });
      return;
    }
    cpu::for_image_chunks<T>(n, 0, nullptr, [&](int64_t lo, int64_t hi, T*) {
      T* col = direct ? nullptr : cpu::thread_scratch<T, 0>(size_t(g.col_rows() * cols));
      for (int64_t i = lo; i < hi; ++i) {
        const T* xi = xp + i * g.image_size();
        if (!direct) cpu::im2col(g, xi, col);
        const T* ci = direct ? xi : col;
        for (int64_t gi = 0; gi < groups; ++gi)
          cpu::gemm<T>(false, false, mg, cols, k, T(1), wp + gi * mg * k, k, ci + gi * k * cols, cols, T(0), op + (i * m + gi * mg) * cols, cols);
      }
    });
  });
}

inline void Conv2d::eval_grad_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("Input");
  const LoDTensor& f = c.in("Filter");
  const LoDTensor& dout = c.in("Output@GRAD");
  const cpu::ConvGeom g = detail::conv2d_geom(c, x.shape(), f.shape());
  const int64_t n = x.dim(0), m = f.dim(0), groups = c.attr<int32_t>("groups");
  const int64_t mg = m / groups, k = g.col_rows() / groups, cols = g.col_cols();
  c.check(dout.shape() == Shape{n, m, g.oh, g.ow}, "Output@GRAD is {}, expected [{}, {}, {}, {}]", dout.shape(), n, m, g.oh, g.ow);
  const bool want_dx = c.has_out("Input@GRAD"), want_dw = c.has_out("Filter@GRAD");
  if (!want_dx && !want_dw) return;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dxp = nullptr;
    T* dwp = nullptr;
    if (want_dx) dxp = c.out("Input@GRAD").resize(x.shape(), x.dtype()).template data<T>();
    if (want_dw) dwp = c.out("Filter@GRAD").resize(f.shape(), f.dtype()).template data<T>();
    const T* xp = x.data<T>();
    const T* wp = f.data<T>();
    const T* dop = dout.data<T>();
    const bool direct = g.is_identity();
    if (groups == 1 && !direct) {
      // Several images per GEMM, as in the forward: dOut of the sub-batch gathered to [m, nb*cols];
      // dW += dOut col^T (one GEMM with a long k), dcol = W^T dOut, then col2im per image.
      cpu::for_image_chunks<T>(n, want_dw ? f.numel() : 0, dwp, [&](int64_t lo, int64_t hi, T* dw) {
        const int64_t per = cpu::images_per_gemm(k * cols, hi - lo);
        T* col = cpu::thread_scratch<T, 0>(size_t(k * per * cols));
        T* dbuf = cpu::thread_scratch<T, 1>(size_t(m * per * cols));
        for (int64_t i0 = lo; i0 < hi; i0 += per) {
          const int64_t nb = std::min(per, hi - i0), ld = nb * cols;
          for (int64_t b = 0; b < nb; ++b)
            for (int64_t r = 0; r < m; ++r) std::copy_n(dop + ((i0 + b) * m + r) * cols, cols, dbuf + r * ld + b * cols);
          if (want_dw) {
            for (int64_t b = 0; b < nb; ++b) cpu::im2col(g, xp + (i0 + b) * g.image_size(), col + b * cols, ld);
            cpu::gemm<T>(false, true, m, k, ld, T(1), dbuf, ld, col, ld, T(1), dw, k);
          }
          if (want_dx) {
            cpu::gemm<T>(true, false, k, ld, m, T(1), wp, k, dbuf, ld, T(0), col, ld);
            for (int64_t b = 0; b < nb; ++b) {
              T* dxi = dxp + (i0 + b) * g.image_size();
              std::fill(dxi, dxi + g.image_size(), T(0));
              cpu::col2im(g, col + b * cols, dxi, ld);
            }
          }
        }
      });
      if (want_dx) c.out("Input@GRAD").set_lod(x.lod());
      return;
    }
    cpu::for_image_chunks<T>(n, want_dw ? f.numel() : 0, dwp, [&](int64_t lo, int64_t hi, T* dw) {
      T* col = direct ? nullptr : cpu::thread_scratch<T, 0>(size_t(g.col_rows() * cols));
      for (int64_t i = lo; i < hi; ++i) {
        const T* doi = dop + i * m * cols;
        if (want_dw) {  // dW_g += dOut_g [mg, cols] * col_g^T [cols, k]
          const T* xi = xp + i * g.image_size();
          if (!direct) cpu::im2col(g, xi, col);
          const T* ci = direct ? xi : col;
          for (int64_t gi = 0; gi < groups; ++gi)
            cpu::gemm<T>(false, true, mg, k, cols, T(1), doi + gi * mg * cols, cols, ci + gi * k * cols, cols, T(1), dw + gi * mg * k, k);
        }
        if (want_dx) {  // dcol_g = W_g^T [k, mg] * dOut_g [mg, cols]; dX = col2im(dcol)
          T* dxi = dxp + i * g.image_size();
          T* dcol = direct ? dxi : col;
          for (int64_t gi = 0; gi < groups; ++gi)
            cpu::gemm<T>(true, false, k, cols, mg, T(1), wp + gi * mg * k, k, doi + gi * mg * cols, cols, T(0), dcol + gi * k * cols, cols);
          if (!direct) {
            std::fill(dxi, dxi + g.image_size(), T(0));
            cpu::col2im(g, dcol, dxi);
          }
        }
      }
    });
    if (want_dx) c.out("Input@GRAD").set_lod(x.lod());
  });
}

}  // namespace oar::ops
