// kernels/cpu/conv2d.hpp: conv2d and conv2d_grad on the CPU: Winograd tiles where they apply and pay
// (kernels/cpu/winograd.hpp), otherwise im2col of several images side by side, then one GEMM per group; images
// spread over the thread pool.
#pragma once
#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/im2col.hpp"
#include "kernels/cpu/winograd.hpp"
#include "oar/ops/conv2d.hpp"
#include "oar/ops/conv2d_fusion.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::ops {

namespace detail {

/// The window sweep of a conv-like op from its decoded attributes: the image is `img` [N, C, H, W] (checked
/// rank 4), the window kh x kw; oh/ow are left to the caller.
inline cpu_kernels::ConvGeom conv_geom(const ConvAttrs& a, const Shape& img, int64_t kh, int64_t kw) {
  const auto &s = a.strides, &p = a.paddings, &d = a.dilations;
  cpu_kernels::ConvGeom g;
  g.c = img[1], g.h = img[2], g.w = img[3], g.kh = kh, g.kw = kw;
  g.sh = s[0], g.sw = s[1], g.ph = p[0], g.pw = p[1], g.dh = d[0], g.dw = d[1];
  return g;
}

/// Checks Input/Filter at run time (their shapes may have been partly unknown when the op was built) and
/// returns the sweep of Input with the output size set.
inline cpu_kernels::ConvGeom conv2d_geom(const KernelContext& c, const ConvAttrs& a, const Shape& x, const Shape& f) {
  const int64_t groups = a.groups;
  c.check(x.rank() == 4 && f.rank() == 4, "Input {} and Filter {} must both be rank 4", x, f);
  c.check(x[1] == f[1] * groups && f[0] % groups == 0, "Input {} has {} channels but Filter {} with groups = {} expects {} (and M a multiple of groups)",
          x, x[1], f, groups, f[1] * groups);
  cpu_kernels::ConvGeom g = conv_geom(a, x, f[2], f[3]);
  g.oh = conv_out_size(g.h, g.kh, g.ph, g.sh, g.dh);
  g.ow = conv_out_size(g.w, g.kw, g.pw, g.sw, g.dw);
  c.check(g.oh > 0 && g.ow > 0, "output size [{}, {}] <= 0 for Input {} and Filter {}", g.oh, g.ow, x, f);
  return g;
}

}  // namespace detail

// Both directions lay several images' column matrices side by side, col [groups * k, nb * cols] with image b
// in columns b*cols.., so that each group's GEMM has a wide N (LeNet-sized layers have small per-image
// products) and the filter gradient is one GEMM with a long K per sub-batch.

namespace detail {

/// dst[0, n) = act(src + bias[r]) (a plain copy without bias): how conv2d / conv2d_fusion store a row of
/// output channel r, with the same float operations elementwise_add and relu would do.
template <class T>
inline void store_output(const T* src, T* dst, int64_t n, const T* bias, int64_t r, bool relu) {
  if (!bias) {
    std::copy_n(src, n, dst);
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

/// Output = act(conv2d(Input, Filter) + bias) for conv2d (no bias, identity) and conv2d_fusion: the bias and
/// relu are applied as each sub-batch's product is copied out, while it is in cache.
inline void conv2d_forward(KernelContext& c, const ConvAttrs& a, const LoDTensor* bias, bool relu) {
  const LoDTensor& x = c.in(Conv2d::input);
  const LoDTensor& f = c.in(Conv2d::filter);
  LoDTensor& out = c.out(Conv2d::output);
  const cpu_kernels::ConvGeom g = detail::conv2d_geom(c, a, x.shape(), f.shape());
  const int64_t n = x.dim(0), m = f.dim(0), groups = a.groups;
  const int64_t mg = m / groups, k = g.col_rows() / groups, cols = g.col_cols();
  if (bias) c.check(bias->numel() == m && bias->dtype() == x.dtype(), "Bias {} {} does not fit Filter {}", name(bias->dtype()), bias->shape(), f.shape());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    out.resize({n, m, g.oh, g.ow}, x.dtype());
    const T* xp = x.data<T>();
    const T* wp = f.data<T>();
    const T* bp = bias ? bias->data<T>() : nullptr;
    T* op = out.data<T>();
    if (cpu_kernels::winograd_applies(g, m, groups)) {
      cpu_kernels::winograd_conv2d<T>(xp, n, g.c, g.h, g.w, wp, m, g.kh, g.ph, g.pw, g.oh, g.ow, op, bp, relu);
      return;
    }
    cpu_kernels::for_image_chunks<T>(n, 0, nullptr, [&](int64_t lo, int64_t hi, T*) {
      const int64_t per = cpu_kernels::images_per_gemm(g.col_rows() * cols, hi - lo);
      T* col = cpu_kernels::thread_scratch<T, 0>(size_t(g.col_rows() * per * cols));
      T* prod = cpu_kernels::thread_scratch<T, 1>(size_t(m * per * cols));
      for (int64_t i0 = lo; i0 < hi; i0 += per) {
        const int64_t nb = std::min(per, hi - i0), ld = nb * cols;
        for (int64_t b = 0; b < nb; ++b) cpu_kernels::im2col(g, xp + (i0 + b) * g.image_size(), col + b * cols, ld);
        for (int64_t gi = 0; gi < groups; ++gi)  // prod rows gi*mg.. = W_g col_g
          cpu_kernels::gemm<T>(false, false, mg, ld, k, T(1), wp + gi * mg * k, k, col + gi * k * ld, ld, T(0), prod + gi * mg * ld, ld);
        for (int64_t b = 0; b < nb; ++b)
          for (int64_t r = 0; r < m; ++r) store_output(prod + r * ld + b * cols, op + ((i0 + b) * m + r) * cols, cols, bp, r, relu);
      }
    });
  });
}

}  // namespace detail

inline void Conv2d::eval_cpu(KernelContext& c, const Attrs& a) { detail::conv2d_forward(c, a, nullptr, false); }

inline void Conv2dFusion::eval_cpu(KernelContext& c, const Attrs& a) { detail::conv2d_forward(c, a, &c.in(bias), a.activation == Activation::relu); }

inline void Conv2d::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& x = c.in(input);
  const LoDTensor& f = c.in(filter);
  const LoDTensor& dout = c.in(output_grad);
  const cpu_kernels::ConvGeom g = detail::conv2d_geom(c, a, x.shape(), f.shape());
  const int64_t n = x.dim(0), m = f.dim(0), groups = a.groups;
  const int64_t mg = m / groups, k = g.col_rows() / groups, cols = g.col_cols();
  c.check(dout.shape() == Shape{n, m, g.oh, g.ow}, "Output@GRAD is {}, expected [{}, {}, {}, {}]", dout.shape(), n, m, g.oh, g.ow);
  const bool want_dx = c.has_out(input_grad), want_dw = c.has_out(filter_grad);
  if (!want_dx && !want_dw) return;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    T* dxp = nullptr;
    T* dwp = nullptr;
    if (want_dx) dxp = c.out(input_grad).resize(x.shape(), x.dtype()).template data<T>();
    if (want_dw) dwp = c.out(filter_grad).resize(f.shape(), f.dtype()).template data<T>();
    const T* xp = x.data<T>();
    const T* wp = f.data<T>();
    const T* dop = dout.data<T>();
    if (cpu_kernels::winograd_applies(g, m, groups)) {
      cpu_kernels::winograd_conv2d_grad<T>(xp, n, g.c, g.h, g.w, wp, m, g.kh, g.ph, g.pw, g.oh, g.ow, dop, dxp, dwp);
      if (want_dx) c.out(input_grad).set_lod(x.lod());
      return;
    }
    // dOut of a sub-batch gathered to dbuf [m, nb*cols]; per group: dW_g += dOut_g col_g^T,
    // dcol_g = W_g^T dOut_g; then col2im per image.
    cpu_kernels::for_image_chunks<T>(n, want_dw ? f.numel() : 0, dwp, [&](int64_t lo, int64_t hi, T* dw) {
      const int64_t per = cpu_kernels::images_per_gemm(g.col_rows() * cols, hi - lo);
      T* col = cpu_kernels::thread_scratch<T, 0>(size_t(g.col_rows() * per * cols));
      T* dbuf = cpu_kernels::thread_scratch<T, 1>(size_t(m * per * cols));
      for (int64_t i0 = lo; i0 < hi; i0 += per) {
        const int64_t nb = std::min(per, hi - i0), ld = nb * cols;
        for (int64_t b = 0; b < nb; ++b)
          for (int64_t r = 0; r < m; ++r) std::copy_n(dop + ((i0 + b) * m + r) * cols, cols, dbuf + r * ld + b * cols);
        if (want_dw) {
          for (int64_t b = 0; b < nb; ++b) cpu_kernels::im2col(g, xp + (i0 + b) * g.image_size(), col + b * cols, ld);
          for (int64_t gi = 0; gi < groups; ++gi)
            cpu_kernels::gemm<T>(false, true, mg, k, ld, T(1), dbuf + gi * mg * ld, ld, col + gi * k * ld, ld, T(1), dw + gi * mg * k, k);
        }
        if (want_dx) {
          for (int64_t gi = 0; gi < groups; ++gi)
            cpu_kernels::gemm<T>(true, false, k, ld, mg, T(1), wp + gi * mg * k, k, dbuf + gi * mg * ld, ld, T(0), col + gi * k * ld, ld);
          for (int64_t b = 0; b < nb; ++b) {
            T* dxi = dxp + (i0 + b) * g.image_size();
            std::fill(dxi, dxi + g.image_size(), T(0));
            cpu_kernels::col2im(g, col + b * cols, dxi, ld);
          }
        }
      }
    });
    if (want_dx) c.out(input_grad).set_lod(x.lod());
  });
}

}  // namespace oar::ops
