// kernels/common/conv2d_transpose.hpp: the window sweep of conv2d_transpose, its sizes checked at run time, from
// which the kernels of every place work.
#pragma once
#include <cstdint>

#include "kernels/common/conv2d.hpp"
#include "oar/ops/conv2d_transpose.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

/// The sweep of the transposed conv's Output [N, M, H', W'] whose columns [M*kh*kw, H*W] line up with Input's pixels.
inline ConvGeom conv2d_transpose_geom(const KernelContext& c, const ops::Conv2dTranspose::Attrs& a, const Shape& x, const Shape& f) {
  const int64_t groups = a.groups;
  c.check(x.rank() == 4 && f.rank() == 4, "Input {} and Filter {} must both be rank 4", x, f);
  c.check(x[1] == f[0] && f[0] % groups == 0, "Input {} has {} channels but Filter {} has {} input channels (groups = {})", x, x[1], f, f[0],
          groups);
  ConvGeom g = conv_geom(a, Shape{x[0], f[1] * groups, 0, 0}, f[2], f[3]);
  g.h = ops::Conv2dTranspose::out_size(x[2], g.kh, g.ph, g.sh, g.dh, a.output_size[0]);  // 0: not given
  g.w = ops::Conv2dTranspose::out_size(x[3], g.kw, g.pw, g.sw, g.dw, a.output_size[1]);
  g.oh = x[2], g.ow = x[3];
  c.check(g.h > 0 && g.w > 0 && ops::detail::conv_out_size(g.h, g.kh, g.ph, g.sh, g.dh) == g.oh &&
              ops::detail::conv_out_size(g.w, g.kw, g.pw, g.sw, g.dw) == g.ow,
          "output size [{}, {}] does not fit Input {} and Filter {}", g.h, g.w, x, f);
  return g;
}

}  // namespace oar::kernels
