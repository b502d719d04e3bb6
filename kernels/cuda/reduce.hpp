// kernels/cuda/reduce.hpp: eval_cuda of reduce_sum / mean / max / min and their gradients (kernels/cuda/reduce.cu),
// planned as the CPU kernels plan them (kernels::make_reduce_plan: kept and reduced dims merged into groups).
#pragma once
#include "kernels/common/reduce.hpp"  // make_reduce_plan
#include "kernels/cuda/host.hpp"
#include "kernels/cuda/reduce_launch.hpp"
#include "oar/ops/reduce.hpp"

namespace oar::cuda_kernels {

/// A CPU reduce plan as the device kernels take it.
inline ReduceGroups groups_of(const kernels::ReducePlan& p) {
  ReduceGroups g;
  g.groups = int(p.size.size());
  g.count = p.count, g.out_numel = p.out_numel;
  int64_t stride = 1;
  for (int k = g.groups - 1; k >= 0; --k) {
    g.size[k] = p.size[size_t(k)], g.red[k] = p.red[size_t(k)], g.ostride[k] = p.ostride[size_t(k)], g.xstride[k] = stride;
    stride *= g.size[k];
  }
  return g;
}

/// The plan of reducing X over `a`'s dims, as the device kernels take it; the reduced axes in `axes`.
inline ReduceGroups reduce_groups(const KernelContext& c, const Shape& x, const ops::ReduceOp::Attrs& a, std::vector<int>& axes) {
  std::string why;
  axes = ops::reduce_axes(x, a.dim, a.reduce_all, why);
  c.check(why.empty(), "{}", why);
  return groups_of(kernels::make_reduce_plan(x, axes));
}

inline void reduce_forward(KernelContext& c, Reduce r, const ops::ReduceOp::Attrs& a) {
  const LoDTensor& x = c.in(ops::ReduceOp::x);
  LoDTensor& out = c.out(ops::ReduceOp::out);
  c.check(&out != &x, "Out must not be X");
  std::vector<int> axes;
  const ReduceGroups g = reduce_groups(c, x.shape(), a, axes);
  const Elem t = elem(c, x.dtype(), true);
  out.resize(ops::reduce_shape(x.shape(), axes, a.keep_dim), x.dtype());
  check(c, reduce(r, t, g, x.raw(), out.raw(), stream(c)));
}

inline void reduce_backward(KernelContext& c, Reduce r, const ops::ReduceOp::Attrs& a) {
  if (!c.has_out(ops::ReduceOp::x_grad)) return;
  const LoDTensor& x = c.in(ops::ReduceOp::x);
  const LoDTensor& dout = c.in(ops::ReduceOp::out_grad);
  LoDTensor& dx = c.out(ops::ReduceOp::x_grad);
  std::vector<int> axes;
  const ReduceGroups g = reduce_groups(c, x.shape(), a, axes);
  c.check(dout.numel() == g.out_numel, "Out@GRAD {} does not match the reduced shape of X {}", dout.shape(), x.shape());
  const Elem t = elem(c, x.dtype());
  const void* out = r == Reduce::max || r == Reduce::min ? c.in(ops::ReduceOp::out).raw() : nullptr;
  dx.resize(x.shape(), x.dtype());
  check(c, reduce_grad(r, t, g, x.raw(), out, dout.raw(), dx.raw(), stream(c)));
  dx.set_lod(x.lod());
}

}  // namespace oar::cuda_kernels

namespace oar::ops {
inline void ReduceSum::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::reduce_forward(c, cuda_kernels::Reduce::sum, a); }
inline void ReduceSum::eval_grad_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::reduce_backward(c, cuda_kernels::Reduce::sum, a); }
inline void ReduceMean::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::reduce_forward(c, cuda_kernels::Reduce::mean, a); }
inline void ReduceMean::eval_grad_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::reduce_backward(c, cuda_kernels::Reduce::mean, a); }
inline void ReduceMax::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::reduce_forward(c, cuda_kernels::Reduce::max, a); }
inline void ReduceMax::eval_grad_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::reduce_backward(c, cuda_kernels::Reduce::max, a); }
inline void ReduceMin::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::reduce_forward(c, cuda_kernels::Reduce::min, a); }
inline void ReduceMin::eval_grad_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::reduce_backward(c, cuda_kernels::Reduce::min, a); }
}  // namespace oar::ops
