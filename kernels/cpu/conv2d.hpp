// kernels/cpu/conv2d.hpp: conv2d, conv2d_fusion and conv2d_grad on the CPU: the op's checks, then the kernel
// kernels/cpu/conv_choice.hpp picks for the shape, im2col + GEMM (kernels/cpu/conv_im2col.hpp) or Winograd tiles
// of either size (kernels/cpu/winograd.hpp).
#pragma once
#include "kernels/common/conv2d.hpp"
#include "kernels/cpu/conv_choice.hpp"
#include "kernels/cpu/conv_im2col.hpp"
#include "oar/ops/conv2d.hpp"
#include "oar/ops/conv2d_fusion.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::ops {

namespace detail {

/// Output = act(conv2d(Input, Filter) + bias) for conv2d (no bias, identity) and conv2d_fusion, on the kernel
/// kernels/cpu/conv_choice.hpp picks for the shape.
inline void conv2d_forward(KernelContext& c, const ConvAttrs& a, const LoDTensor* bias, bool relu) {
  const LoDTensor& x = c.in(Conv2d::input);
  const LoDTensor& f = c.in(Conv2d::filter);
  LoDTensor& out = c.out(Conv2d::output);
  const cpu_kernels::ConvGeom g = kernels::conv2d_geom(c, a, x.shape(), f.shape());
  const int64_t n = x.dim(0), m = f.dim(0), groups = a.groups;
  if (bias) c.check(bias->numel() == m && bias->dtype() == x.dtype(), "Bias {} {} does not fit Filter {}", name(bias->dtype()), bias->shape(), f.shape());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    out.resize({n, m, g.oh, g.ow}, x.dtype());
    const T* xp = x.data<T>();
    const T* wp = f.data<T>();
    const T* bp = bias ? bias->data<T>() : nullptr;
    T* op = out.data<T>();
    cpu_kernels::ConvKernel cand[3];
    const int nc = cpu_kernels::conv_candidates(g, m, groups, cand);
    const cpu_kernels::ConvShapeKey key(cpu_kernels::ConvPass::forward, sizeof(T), n, g, m, groups);
    cpu_kernels::run_chosen_conv(key, cand, nc, [&](cpu_kernels::ConvKernel k) {
      if (k == cpu_kernels::ConvKernel::im2col)
        cpu_kernels::im2col_conv2d<T>(g, n, m, groups, xp, wp, op, bp, relu);
      else
        cpu_kernels::winograd_conv2d<T>(cpu_kernels::tiles_of(k), xp, n, g.c, g.h, g.w, wp, m, g.kh, g.ph, g.pw, g.oh, g.ow, op, bp, relu);
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
  const cpu_kernels::ConvGeom g = kernels::conv2d_geom(c, a, x.shape(), f.shape());
  const int64_t n = x.dim(0), m = f.dim(0), groups = a.groups;
  c.check(dout.shape() == Shape{n, m, g.oh, g.ow}, "Output@GRAD is {}, expected [{}, {}, {}, {}]", dout.shape(), n, m, g.oh, g.ow);
  const bool want_dx = c.has_out(input_grad), want_dw = c.has_out(filter_grad);
  if (!want_dx && !want_dw) return;
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const kernels::ConvGradData<T> d = kernels::conv_grad_data<Conv2d, T>(c, x, f, dout);
    const T *xp = d.x, *wp = d.f, *dop = d.dout;
    T *dxp = d.dx, *dwp = d.df;
    cpu_kernels::ConvKernel cand[3];
    const int nc = cpu_kernels::conv_candidates(g, m, groups, cand);
    using cpu_kernels::ConvPass;
    const ConvPass pass = want_dx && want_dw ? ConvPass::backward_both : want_dx ? ConvPass::backward_dx : ConvPass::backward_dw;
    cpu_kernels::run_chosen_conv(cpu_kernels::ConvShapeKey(pass, sizeof(T), n, g, m, groups), cand, nc, [&](cpu_kernels::ConvKernel k) {
      if (k == cpu_kernels::ConvKernel::im2col)
        cpu_kernels::im2col_conv2d_grad<T>(g, n, m, groups, xp, wp, dop, dxp, dwp);
      else
        cpu_kernels::winograd_conv2d_grad<T>(cpu_kernels::tiles_of(k), xp, n, g.c, g.h, g.w, wp, m, g.kh, g.ph, g.pw, g.oh, g.ow, dop, dxp, dwp);
    });
    if (want_dx) c.out(input_grad).set_lod(x.lod());
  });
}

}  // namespace oar::ops
