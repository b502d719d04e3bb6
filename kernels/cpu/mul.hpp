// kernels/cpu/mul.hpp: mul and mul_grad on the CPU through the GEMM path (kernels/cpu/gemm.hpp).
#pragma once
#include "kernels/cpu/gemm.hpp"
#include "oar/ops/mul.hpp"
#include "oar/runtime/kernel_context.hpp"

namespace oar::ops {

namespace detail {
/// (rows, cols) of `s` flattened at `d`.
inline std::pair<int64_t, int64_t> flat2(const Shape& s, int d) { return {s.numel(0, d), s.numel(d, s.rank())}; }
}  // namespace detail

inline void Mul::eval_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  const LoDTensor& y = c.in("Y");
  LoDTensor& out = c.out("Out");
  int xd = c.attr<int32_t>("x_num_col_dims"), yd = c.attr<int32_t>("y_num_col_dims");
  auto [m, k] = detail::flat2(x.shape(), xd);
  auto [k2, n] = detail::flat2(y.shape(), yd);
  c.check(k == k2, "X {} has {} columns at x_num_col_dims={}, Y {} has {} rows at y_num_col_dims={}", x.shape(), k, xd, y.shape(), k2, yd);
  Shape os = x.shape().slice(0, xd);
  for (int i = yd; i < y.rank(); ++i) os.push_back(y.dim(i));
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    out.resize(os, x.dtype());
    cpu::gemm<T>(false, false, m, n, k, T(1), x.data<T>(), k, y.data<T>(), n, T(0), out.data<T>(), n);
  });
  out.set_lod(x.lod());
}

inline void Mul::eval_grad_cpu(KernelContext& c) {
  const LoDTensor& x = c.in("X");
  const LoDTensor& y = c.in("Y");
  const LoDTensor& dout = c.in("Out@GRAD");
  int xd = c.attr<int32_t>("x_num_col_dims"), yd = c.attr<int32_t>("y_num_col_dims");
  auto [m, k] = detail::flat2(x.shape(), xd);
  int64_t n = y.shape().numel(yd, y.rank());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    if (c.has_out("X@GRAD")) {  // dX = dOut * Y^T
      LoDTensor& dx = c.out("X@GRAD");
      dx.resize(x.shape(), x.dtype());
      cpu::gemm<T>(false, true, m, k, n, T(1), dout.data<T>(), n, y.data<T>(), n, T(0), dx.data<T>(), k);
      dx.set_lod(x.lod());
    }
    if (c.has_out("Y@GRAD")) {  // dY = X^T * dOut
      LoDTensor& dy = c.out("Y@GRAD");
      dy.resize(y.shape(), y.dtype());
      cpu::gemm<T>(true, false, k, n, m, T(1), x.data<T>(), k, dout.data<T>(), n, T(0), dy.data<T>(), n);
    }
  });
}

}  // namespace oar::ops
