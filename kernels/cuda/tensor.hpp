// kernels/cuda/tensor.hpp: eval_cuda of cast and transpose (kernels/cuda/tensor.cu). The views, whole copies
// and zero fills (reshape, flatten, squeeze, unsqueeze, assign, concat, split, stack, fill_zeros_like) need none:
// their CPU kernels serve every place (`any_place`).
#pragma once
#include "kernels/cuda/host.hpp"
#include "kernels/cuda/tensor_launch.hpp"
#include "oar/ops/assign.hpp"
#include "oar/ops/fill_zeros_like.hpp"
#include "oar/ops/transpose.hpp"

namespace oar::cuda_kernels {

/// The element type of a cast: the numeric ones, and bool.
inline Elem cast_elem(const KernelContext& c, DType t) {
  if (t == DType::boolean) return Elem::b8;
  if (t == DType::f16) return Elem::f16;
  if (t == DType::bf16) return Elem::bf16;
  return elem(c, t, true);
}

/// out = x with its dims permuted by `perm` (out dim k is x's dim perm[k]).
inline void transpose(const KernelContext& c, const Tensor& x, std::span<const int32_t> perm, Tensor& out) {
  const Shape& is = x.shape();
  const int r = is.rank();
  Shape os;
  for (int32_t p : perm) os.push_back(is[p]);
  out.resize(os, x.dtype());
  Permute p;
  p.rank = r;
  int64_t stride[Permute::max_rank];
  if (r) stride[r - 1] = 1;
  for (int d = r - 2; d >= 0; --d) stride[d] = stride[d + 1] * is[d + 1];
  for (int k = 0; k < r; ++k) p.dims[k] = os[k], p.strides[k] = stride[perm[size_t(k)]];
  check(c, permute(int(size_of(x.dtype())), p, x.raw(), out.raw(), x.numel(), stream(c)));
}

}  // namespace oar::cuda_kernels

namespace oar::ops {

inline void Cast::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  const DType to = a.out_dtype;
  if (to == xt.dtype()) {
    if (&ot != &xt) ot.copy_from(xt);
  } else {
    c.check(&ot != &xt, "cannot cast in place from {} to {}", name(xt.dtype()), name(to));
    const cuda_kernels::Elem from_e = cuda_kernels::cast_elem(c, xt.dtype()), to_e = cuda_kernels::cast_elem(c, to);
    ot.resize(xt.shape(), to);
    cuda_kernels::check(c, cuda_kernels::cast(from_e, to_e, xt.raw(), ot.raw(), xt.numel(), cuda_kernels::stream(c)));
  }
  if (&ot != &xt) ot.set_lod(xt.lod());
}

inline void Transpose::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  check_perm(c, xt.shape(), a.axis);
  LoDTensor& ot = c.out(out);
  c.check(&ot != &xt, "transpose cannot run in place");
  cuda_kernels::transpose(c, xt, a.axis, ot);
  ot.clear_lod();
}

inline void Transpose::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& dout = c.in(out_grad);
  check_perm(c, dout.shape(), a.axis);
  const std::array<int32_t, Shape::kMaxRank> inv = inverse(a.axis);
  LoDTensor& dx = c.out(x_grad);
  cuda_kernels::transpose(c, dout, std::span<const int32_t>(inv.data(), a.axis.size()), dx);
  dx.set_lod(c.in(x).lod());
}

}  // namespace oar::ops
