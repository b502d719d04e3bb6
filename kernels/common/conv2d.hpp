// kernels/common/conv2d.hpp: a conv-like op's window sweep from its attributes, and conv2d's run-time checks of
// Input and Filter.
#pragma once
#include <cstdint>

#include "kernels/common/im2col.hpp"
#include "oar/ops/conv2d.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// The window sweep of a conv-like op from its decoded attributes: the image is `img` [N, C, H, W] (checked
/// rank 4), the window kh x kw; oh/ow are left to the caller.
inline ConvGeom conv_geom(const ops::detail::ConvAttrs& a, const Shape& img, int64_t kh, int64_t kw) {
  const auto &s = a.strides, &p = a.paddings, &d = a.dilations;
  ConvGeom g;
  g.c = img[1], g.h = img[2], g.w = img[3], g.kh = kh, g.kw = kw;
  g.sh = s[0], g.sw = s[1], g.ph = p[0], g.pw = p[1], g.dh = d[0], g.dw = d[1];
  return g;
}

/// Checks Input/Filter at run time (their shapes may have been partly unknown when the op was built) and
/// returns the sweep of Input with the output size set.
inline ConvGeom conv2d_geom(const KernelContext& c, const ops::detail::ConvAttrs& a, const Shape& x, const Shape& f) {
  const int64_t groups = a.groups;
  c.check(x.rank() == 4 && f.rank() == 4, "Input {} and Filter {} must both be rank 4", x, f);
  c.check(x[1] == f[1] * groups && f[0] % groups == 0, "Input {} has {} channels but Filter {} with groups = {} expects {} (and M a multiple of groups)",
          x, x[1], f, groups, f[1] * groups);
  ConvGeom g = conv_geom(a, x, f[2], f[3]);
  g.oh = ops::detail::conv_out_size(g.h, g.kh, g.ph, g.sh, g.dh);
  g.ow = ops::detail::conv_out_size(g.w, g.kw, g.pw, g.sw, g.dw);
  c.check(g.oh > 0 && g.ow > 0, "output size [{}, {}] <= 0 for Input {} and Filter {}", g.oh, g.ow, x, f);
  return g;
}

/// The gradient output `slot` resized like `like` when the op writes it, as T*; null when it is not wanted.
template <class T>
T* grad_out(KernelContext& c, Slot slot, const LoDTensor& like) {
  return c.has_out(slot) ? c.out(slot).resize(like.shape(), like.dtype()).template data<T>() : nullptr;
}

/// A conv gradient kernel's operands as T: Input, Filter and Output@GRAD, and Input@GRAD and Filter@GRAD resized
/// (null where the op does not write them). `Op`: conv2d or conv2d_transpose.
template <class T>
struct ConvGradData {
  const T *x, *f, *dout;
  T *dx, *df;
};
template <class Op, class T>
ConvGradData<T> conv_grad_data(KernelContext& c, const LoDTensor& x, const LoDTensor& f, const LoDTensor& dout) {
  return {x.data<T>(), f.data<T>(), dout.data<T>(), grad_out<T>(c, Op::input_grad, x), grad_out<T>(c, Op::filter_grad, f)};
}

}  // namespace oar::kernels
