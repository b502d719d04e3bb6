// kernels/cpu/mul.hpp: mul and mul_grad on the CPU through the GEMM path (kernels/cpu/gemm.hpp).
#pragma once
#include "kernels/cpu/gemm.hpp"
#include "oar/ops/mul.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::ops {

namespace detail {
/// (rows, cols) of `s` flattened at `d`.
inline std::pair<int64_t, int64_t> flat2(const Shape& s, int d) { return {s.numel(0, d), s.numel(d, s.rank())}; }
}  // namespace detail

inline void Mul::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const LoDTensor& yt = c.in(y);
  LoDTensor& ot = c.out(out);
  const int xd = a.x_num_col_dims, yd = a.y_num_col_dims;
  auto [m, k] = detail::flat2(xt.shape(), xd);
  auto [k2, n] = detail::flat2(yt.shape(), yd);
  c.check(k == k2, "X {} has {} columns at x_num_col_dims={}, Y {} has {} rows at y_num_col_dims={}", xt.shape(), k, xd, yt.shape(), k2, yd);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    Shape os = xt.shape().slice(0, xd);
    for (int i = yd; i < yt.rank(); ++i) os.push_back(yt.dim(i));
    ot.resize(os, xt.dtype());
    cpu_kernels::gemm<T>(false, false, m, n, k, T(1), xt.data<T>(), k, yt.data<T>(), n, T(0), ot.data<T>(), n);
  });
  ot.set_lod(xt.lod());
}

inline void Mul::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const LoDTensor& yt = c.in(y);
  const LoDTensor& dout = c.in(out_grad);
  auto [m, k] = detail::flat2(xt.shape(), a.x_num_col_dims);
  const int64_t n = yt.shape().numel(a.y_num_col_dims, yt.rank());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    if (c.has_out(x_grad)) {  // dX = dOut * Y^T
      LoDTensor& dx = c.out(x_grad);
      dx.resize(xt.shape(), xt.dtype());
      cpu_kernels::gemm<T>(false, true, m, k, n, T(1), dout.data<T>(), n, yt.data<T>(), n, T(0), dx.data<T>(), k);
      dx.set_lod(xt.lod());
    }
    if (c.has_out(y_grad)) {  // dY = X^T * dOut
      LoDTensor& dy = c.out(y_grad);
      dy.resize(yt.shape(), yt.dtype());
      cpu_kernels::gemm<T>(true, false, k, n, m, T(1), xt.data<T>(), k, dout.data<T>(), n, T(0), dy.data<T>(), n);
    }
  });
}

}  // namespace oar::ops
