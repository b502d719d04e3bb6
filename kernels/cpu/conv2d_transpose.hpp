// kernels/cpu/conv2d_transpose.hpp: conv2d_transpose and its grad on the CPU, the conv2d kernels run the
// other way round: forward = GEMM then col2im into the output, input grad = im2col of dOutput then GEMM.
#pragma once
#include "kernels/common/conv2d_transpose.hpp"
#include "kernels/cpu/conv2d.hpp"
#include "kernels/cpu/scratch.hpp"
#include "oar/ops/conv2d_transpose.hpp"

namespace oar::ops {

inline void Conv2dTranspose::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& x = c.in(input);
  const LoDTensor& f = c.in(filter);
  LoDTensor& out = c.out(output);
  const cpu_kernels::ConvGeom g = kernels::conv2d_transpose_geom(c, a, x.shape(), f.shape());
  const int64_t n = x.dim(0), cin = x.dim(1), groups = a.groups;
  const int64_t cg = cin / groups, k = g.col_rows() / groups, cols = g.col_cols();
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    out.resize({n, g.c, g.h, g.w}, x.dtype());
    const T* xp = x.data<T>();
    const T* wp = f.data<T>();
    T* op = out.data<T>();
    const bool direct = g.is_identity();
    cpu_kernels::for_image_chunks<T>(n, 0, nullptr, [&](int64_t lo, int64_t hi, T*) {
      T* col = direct ? nullptr : cpu_kernels::thread_scratch<T, 0>(size_t(g.col_rows() * cols));
      for (int64_t i = lo; i < hi; ++i) {
        T* oi = op + i * g.image_size();
        T* ci = direct ? oi : col;
        for (int64_t gi = 0; gi < groups; ++gi)  // col_g [k, cols] = W_g^T [k, cg] * X_g [cg, cols]
          cpu_kernels::gemm<T>(true, false, k, cols, cg, T(1), wp + gi * cg * k, k, xp + (i * cin + gi * cg) * cols, cols, T(0), ci + gi * k * cols, cols);
        if (!direct) {
          std::fill(oi, oi + g.image_size(), T(0));
          cpu_kernels::col2im(g, col, oi);
        }
      }
    });
  });
}

inline void Conv2dTranspose::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& x = c.in(input);
  const LoDTensor& f = c.in(filter);
  const LoDTensor& dout = c.in(output_grad);
  const cpu_kernels::ConvGeom g = kernels::conv2d_transpose_geom(c, a, x.shape(), f.shape());
  const int64_t n = x.dim(0), cin = x.dim(1), groups = a.groups;
  const int64_t cg = cin / groups, k = g.col_rows() / groups, cols = g.col_cols();
  c.check(dout.shape() == Shape{n, g.c, g.h, g.w}, "Output@GRAD is {}, expected [{}, {}, {}, {}]", dout.shape(), n, g.c, g.h, g.w);
  const bool want_dx = c.has_out(input_grad), want_dw = c.has_out(filter_grad);
  if (!want_dx && !want_dw) return;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const kernels::ConvGradData<T> d = kernels::conv_grad_data<Conv2dTranspose, T>(c, x, f, dout);
    const T *xp = d.x, *wp = d.f, *dop = d.dout;
    T *dxp = d.dx, *dwp = d.df;
    const bool direct = g.is_identity();
    cpu_kernels::for_image_chunks<T>(n, want_dw ? f.numel() : 0, dwp, [&](int64_t lo, int64_t hi, T* dw) {
      T* col = direct ? nullptr : cpu_kernels::thread_scratch<T, 0>(size_t(g.col_rows() * cols));
      for (int64_t i = lo; i < hi; ++i) {
        const T* doi = dop + i * g.image_size();
        if (!direct) cpu_kernels::im2col(g, doi, col);
        const T* ci = direct ? doi : col;
        for (int64_t gi = 0; gi < groups; ++gi) {
          const T* xg = xp + (i * cin + gi * cg) * cols;
          if (want_dx)  // dX_g [cg, cols] = W_g [cg, k] * col_g [k, cols]
            cpu_kernels::gemm<T>(false, false, cg, cols, k, T(1), wp + gi * cg * k, k, ci + gi * k * cols, cols, T(0), dxp + (i * cin + gi * cg) * cols, cols);
          if (want_dw)  // dW_g [cg, k] += X_g [cg, cols] * col_g^T [cols, k]
            cpu_kernels::gemm<T>(false, true, cg, k, cols, T(1), xg, cols, ci + gi * k * cols, cols, T(1), dw + gi * cg * k, k);
        }
      }
    });
    if (want_dx) c.out(input_grad).set_lod(x.lod());
  });
}

}  // namespace oar::ops
