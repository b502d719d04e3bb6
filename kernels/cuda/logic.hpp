// kernels/cuda/logic.hpp: eval_cuda of the comparison ops and the two-input logical ops (ops/compare.hpp),
// one_hot, and sigmoid_cross_entropy_with_logits with its gradient (kernels/cuda/logic.cu). Each checks what
// its CPU kernel checks, with the CPU's messages and, where the CPU has them, its functions: the comparisons' and
// logical ops' plans (compare_plan, logical_plan), sigmoid_cross_entropy_plan and its grad twin, and one_hot's
// label check (checked_indices).
#pragma once
#include "kernels/common/compare.hpp"  // kernels::compare_plan, logical_plan
#include "kernels/common/gather.hpp"   // kernels::checked_indices
#include "kernels/common/sigmoid_cross_entropy_with_logits.hpp"  // kernels::sigmoid_cross_entropy_plan, _grad_plan
#include "kernels/cuda/host.hpp"
#include "kernels/cuda/logic_launch.hpp"
#include "oar/ops/compare.hpp"
#include "oar/ops/one_hot.hpp"
#include "oar/ops/sigmoid_cross_entropy_with_logits.hpp"

namespace oar::cuda_kernels {

/// out[i] = cmp(x[i], y[j]) with Y broadcast over X, as cpu_kernels::compare. requires: Out is neither X nor Y.
inline void compare_forward(KernelContext& c, Compare op, const ops::CompareOp::Attrs& a) {
  const kernels::ComparePlan p = kernels::compare_plan(c, a);
  check(c, compare(op, elem(c, p.x.dtype(), true), Broadcast{p.b.pre, p.b.n, p.b.post, p.b.same}, p.x.raw(), p.y.raw(), p.out.data<bool>(), stream(c)));
  p.out.set_lod(p.x.lod());
}

/// out[i] = f(x[i], y[i]) over bool tensors of one shape, as cpu_kernels::logical. In-place allowed.
inline void logical_forward(KernelContext& c, Logical op) {
  const kernels::LogicalPlan p = kernels::logical_plan(c);
  check(c, logical(op, p.x.data<bool>(), p.y.data<bool>(), p.out.data<bool>(), p.x.numel(), stream(c)));
  if (&p.out != &p.x) p.out.set_lod(p.x.lod());
}

}  // namespace oar::cuda_kernels

namespace oar::ops {

#define OAR_DEFINE_COMPARE_CUDA(op_type, Op, Functor) \
  inline void Op::eval_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::compare_forward(c, cuda_kernels::Compare::op_type, a); }
OAR_COMPARE_OPS(OAR_DEFINE_COMPARE_CUDA)
#undef OAR_DEFINE_COMPARE_CUDA

#define OAR_DEFINE_LOGICAL_CUDA(op_type, Op, Functor) \
  inline void Op::eval_cuda(KernelContext& c, const NoAttrs&) { cuda_kernels::logical_forward(c, cuda_kernels::Logical::op_type); }
OAR_LOGICAL_BINARY_OPS(OAR_DEFINE_LOGICAL_CUDA)
#undef OAR_DEFINE_LOGICAL_CUDA

/// The labels come to the host to be checked as the CPU checks them (an oar::Error naming the first one outside
/// [0, depth)), which synchronizes the stream first (they may be a kernel's output); the rows are then written
/// on the device from the device's labels.
inline void OneHot::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  const int64_t dep = a.depth;
  c.check(xt.rank() >= 1 && xt.dim(xt.rank() - 1) == 1, "X must end in a dim of 1 ([N, 1]), got {}", xt.shape());
  Tensor host = xt;  // no element is read when there is none (only the dtype is checked)
  if (xt.numel() > 0) {
    c.device().synchronize();
    host = xt.to(cpu());
  }
  kernels::checked_indices(c, host, dep, x, [&] { return fmt::format("depth = {}", dep); });
  Shape os = xt.shape();
  os[os.rank() - 1] = dep;
  const DType t = a.dtype;
  LoDTensor& ot = c.out(out);
  c.dispatch(type_list<float, double, int32_t, int64_t>{}, t, [&](auto) {
    ot.resize(os, t);
    const cuda_kernels::Elem label_t = xt.dtype() == DType::i32 ? cuda_kernels::Elem::i32 : cuda_kernels::Elem::i64;  // checked_indices took no other
    cuda_kernels::check(c, cuda_kernels::one_hot(cuda_kernels::elem(c, t, true), label_t, xt.raw(), ot.raw(), xt.numel(), dep, cuda_kernels::stream(c)));
  });
  ot.set_lod(xt.lod());
}

inline void SigmoidCrossEntropyWithLogits::eval_cuda(KernelContext& c, const Attrs& a) {
  const kernels::SigmoidCrossEntropyPlan p = kernels::sigmoid_cross_entropy_plan(c);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *px = p.x.data<T>(), *pl = p.label.data<T>();  // the CPU's dtype checks
    cuda_kernels::check(c, cuda_kernels::sigmoid_cross_entropy(cuda_kernels::elem(c, p.x.dtype()), px, pl, p.out.data<T>(), p.x.numel(), a.ignore_index,
                                                               cuda_kernels::stream(c)));
  });
  if (&p.out != &p.x) p.out.set_lod(p.x.lod());
}

// NOTE: Label's shape is checked here, which the CPU kernel leaves out (it would read past a smaller Label).
inline void SigmoidCrossEntropyWithLogits::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const kernels::SigmoidCrossEntropyGradPlan p = kernels::sigmoid_cross_entropy_grad_plan(c);
  const LoDTensor& xt = p.x;
  c.check(p.label.shape() == xt.shape(), "Label {} must have X's shape {}", p.label.shape(), xt.shape());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    p.x_grad.resize(xt.shape(), xt.dtype());
    const T *px = xt.data<T>(), *pl = p.label.data<T>(), *pd = p.out_grad.data<T>();
    cuda_kernels::check(c, cuda_kernels::sigmoid_cross_entropy_grad(cuda_kernels::elem(c, xt.dtype()), px, pl, pd, p.x_grad.data<T>(), xt.numel(),
                                                                    a.ignore_index, cuda_kernels::stream(c)));
  });
  p.x_grad.set_lod(xt.lod());
}

}  // namespace oar::ops
