// kernels/common/matmul.hpp: matmul and matmul_grad written once for every place: the shapes checked, the
// batches laid out, and the products asked of `P`, the place's GEMM (cpu_kernels::CpuMatmul on the CPU,
// cuBLAS in kernels/cuda/nn.hpp).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

#include "oar/ops/matmul.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels {

namespace detail {
struct MatmulPlan {
  ops::MatDesc x, y;
  int64_t batch, m, n, k, sx, sy, sout;
  Shape out;
};
inline MatmulPlan matmul_plan(const KernelContext& c, const ops::Matmul::Attrs& a, const Tensor& x, const Tensor& y) {
  MatmulPlan p;
  bool tx = a.transpose_x, ty = a.transpose_y;
  std::string why = ops::matmul_shape(x.shape(), y.shape(), tx, ty, p.out);
  c.check(why.empty(), "{}", why);
  c.check(x.dtype() == y.dtype(), "X is {} but Y is {}", name(x.dtype()), name(y.dtype()));
  p.x = ops::mat_desc(x.shape(), tx, true), p.y = ops::mat_desc(y.shape(), ty, false);
  p.batch = p.x.batch == 0 && p.y.batch == 0 ? 1 : std::max(p.x.batch, p.y.batch);  // may be 0: an empty batch
  p.m = p.x.height(), p.k = p.x.width(), p.n = p.y.width();
  p.sx = p.x.batch ? p.x.rows * p.x.cols : 0;
  p.sy = p.y.batch ? p.y.rows * p.y.cols : 0;
  p.sout = p.m * p.n;
  return p;
}
}  // namespace detail

/// Out = alpha op(X) op(Y), batched, with the products of `P` (cpu_kernels::CpuMatmul or CUDA's).
template <class P>
void matmul_forward(KernelContext& c, const ops::Matmul::Attrs& attrs) {
  const LoDTensor& x = c.in(ops::Matmul::x);
  const LoDTensor& y = c.in(ops::Matmul::y);
  LoDTensor& out = c.out(ops::Matmul::out);
  const detail::MatmulPlan p = detail::matmul_plan(c, attrs, x, y);
  const float alpha = attrs.alpha;
  c.dispatch(typename P::types{}, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    out.resize(p.out, x.dtype());
    P::template batched<T>(c, p.x.trans, p.y.trans, p.m, p.n, p.k, compute_t<T>(alpha), x.data<T>(), p.x.cols, p.sx, y.data<T>(), p.y.cols, p.sy,
                           out.data<T>(), p.n, p.sout, p.batch);
  });
}

/// With op(X) [M, K], op(Y) [K, N], dOut [M, N] per batch:
///   dX = alpha * dOut op(Y)^T  (stored transposed when transpose_X: op(Y) dOut^T)
///   dY = alpha * op(X)^T dOut  (stored transposed when transpose_Y: dOut^T op(X))
/// An operand shared by every batch gets the sum over the batch.
/// X@GRAD and Y@GRAD with the products of `P`; a shared (unbatched) operand's gradient sums over the batch.
template <class P>
void matmul_backward(KernelContext& c, const ops::Matmul::Attrs& attrs) {
  const LoDTensor& x = c.in(ops::Matmul::x);
  const LoDTensor& y = c.in(ops::Matmul::y);
  const LoDTensor& dout = c.in(ops::Matmul::out_grad);
  const detail::MatmulPlan p = detail::matmul_plan(c, attrs, x, y);
  c.check(dout.numel() == p.batch * p.m * p.n, "Out@GRAD {} does not match Out {}", dout.shape(), p.out);
  const float alpha = attrs.alpha;
  const bool tx = p.x.trans, ty = p.y.trans;
  c.dispatch(typename P::types{}, x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = x.data<T>(), *py = y.data<T>(), *pd = dout.data<T>();
    const compute_t<T> a = compute_t<T>(alpha);
    if (c.has_out(ops::Matmul::x_grad)) {
      LoDTensor& dx = c.out(ops::Matmul::x_grad);
      dx.resize(x.shape(), x.dtype());
      T* g = dx.data<T>();
      const bool shared = p.x.batch == 0 && p.y.batch != 0;
      if (!tx) {  // [M, K] = dOut [M, N] * op(Y)^T
        if (shared) P::template batch_sum<T>(c, false, !ty, p.m, p.k, p.n, a, pd, p.n, p.sout, py, p.y.cols, p.sy, g, p.x.cols, p.batch);
        else P::template batched<T>(c, false, !ty, p.m, p.k, p.n, a, pd, p.n, p.sout, py, p.y.cols, p.sy, g, p.x.cols, p.sx, p.batch);
      } else {  // [K, M] = op(Y) [K, N] * dOut^T
        if (shared) P::template batch_sum<T>(c, ty, true, p.k, p.m, p.n, a, py, p.y.cols, p.sy, pd, p.n, p.sout, g, p.x.cols, p.batch);
        else P::template batched<T>(c, ty, true, p.k, p.m, p.n, a, py, p.y.cols, p.sy, pd, p.n, p.sout, g, p.x.cols, p.sx, p.batch);
      }
      dx.set_lod(x.lod());
    }
    if (c.has_out(ops::Matmul::y_grad)) {
      LoDTensor& dy = c.out(ops::Matmul::y_grad);
      dy.resize(y.shape(), y.dtype());
      T* g = dy.data<T>();
      const bool shared = p.y.batch == 0 && p.x.batch != 0;
      if (!ty) {  // [K, N] = op(X)^T [K, M] * dOut [M, N]
        if (shared) P::template batch_sum<T>(c, !tx, false, p.k, p.n, p.m, a, px, p.x.cols, p.sx, pd, p.n, p.sout, g, p.y.cols, p.batch);
        else P::template batched<T>(c, !tx, false, p.k, p.n, p.m, a, px, p.x.cols, p.sx, pd, p.n, p.sout, g, p.y.cols, p.sy, p.batch);
      } else {  // [N, K] = dOut^T [N, M] * op(X) [M, K]
        if (shared) P::template batch_sum<T>(c, true, tx, p.n, p.k, p.m, a, pd, p.n, p.sout, px, p.x.cols, p.sx, g, p.y.cols, p.batch);
        else P::template batched<T>(c, true, tx, p.n, p.k, p.m, a, pd, p.n, p.sout, px, p.x.cols, p.sx, g, p.y.cols, p.sy, p.batch);
      }
      dy.set_lod(y.lod());
    }
  });
}

}  // namespace oar::kernels
