// kernels/cuda/logic.hpp: eval_cuda of the comparison ops and the two-input logical ops (ops/compare.hpp),
// one_hot, and sigmoid_cross_entropy_with_logits with its gradient (kernels/cuda/logic.cu). Each checks what
// its CPU kernel checks, with the CPU's messages and, where the CPU has them, its functions: the comparisons'
// broadcast plan (run_broadcast) and one_hot's label check (checked_indices).
#pragma once
#include "kernels/cpu/compare.hpp"  // cpu_kernels::detail::run_broadcast
#include "kernels/cpu/gather.hpp"   // cpu_kernels::checked_indices
#include "kernels/cuda/host.hpp"
#include "oar/ops/compare.hpp"
#include "oar/ops/one_hot.hpp"
#include "oar/ops/sigmoid_cross_entropy_with_logits.hpp"

namespace oar::cuda_kernels {

/// out[i] = cmp(x[i], y[j]) with Y broadcast over X, as cpu_kernels::compare. requires: Out is neither X nor Y.
inline void compare_forward(KernelContext& c, Compare op, const ops::CompareOp::Attrs& a) {
  using O = ops::CompareOp;
  const LoDTensor& x = c.in(O::x);
  const LoDTensor& y = c.in(O::y);
  const ops::BroadcastDims b = cpu_kernels::detail::run_broadcast(c, x, y, a.axis);
  LoDTensor& out = c.out(O::out);
  c.check(&out != &x && &out != &y, "Out cannot be X or Y (it is bool, they are {})", name(x.dtype()));
  c.dispatch(type_list<int32_t, int64_t, float, double>{}, x.dtype(), [&](auto) {
    out.resize(x.shape(), DType::boolean);
    check(c, compare(op, elem(c, x.dtype(), true), Broadcast{b.pre, b.n, b.post, b.same}, x.raw(), y.raw(), out.data<bool>(), stream(c)));
  });
  out.set_lod(x.lod());
}

/// out[i] = f(x[i], y[i]) over bool tensors of one shape, as cpu_kernels::logical. In-place allowed.
inline void logical_forward(KernelContext& c, Logical op) {
  using O = ops::LogicalBinaryOp;
  const LoDTensor& x = c.in(O::x);
  const LoDTensor& y = c.in(O::y);
  c.check(x.dtype() == DType::boolean && y.dtype() == DType::boolean, "X ('{}') and Y ('{}') must be bool, got {} and {}", c.in_name(O::x), c.in_name(O::y),
          name(x.dtype()), name(y.dtype()));
  c.check(x.shape() == y.shape(), "X ('{}') {} and Y ('{}') {} must have the same shape", c.in_name(O::x), x.shape(), c.in_name(O::y), y.shape());
  LoDTensor& out = c.out(O::out);
  if (&out != &x && &out != &y) out.resize(x.shape(), DType::boolean);
  check(c, logical(op, x.data<bool>(), y.data<bool>(), out.data<bool>(), x.numel(), stream(c)));
  if (&out != &x) out.set_lod(x.lod());
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
  cpu_kernels::checked_indices(c, host, dep, x, [&] { return fmt::format("depth = {}", dep); });
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
  const LoDTensor& xt = c.in(x);
  const LoDTensor& lt = c.in(label);
  LoDTensor& ot = c.out(out);
  c.check(lt.shape() == xt.shape(), "Label {} must have X's shape {}", lt.shape(), xt.shape());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    if (&ot != &xt) ot.resize(xt.shape(), xt.dtype());
    const T *px = xt.data<T>(), *pl = lt.data<T>();  // the CPU's dtype checks
    T* po = ot.data<T>();
    cuda_kernels::check(c, cuda_kernels::sigmoid_cross_entropy(cuda_kernels::elem(c, xt.dtype()), px, pl, po, xt.numel(), a.ignore_index,
                                                               cuda_kernels::stream(c)));
  });
  if (&ot != &xt) ot.set_lod(xt.lod());
}

// NOTE: Label's shape is checked here, which the CPU kernel leaves out (it would read past a smaller Label).
inline void SigmoidCrossEntropyWithLogits::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& lt = c.in(label);
  const LoDTensor& dout = c.in(out_grad);
  LoDTensor& dx = c.out(x_grad);
  c.check(dout.shape() == xt.shape(), "Out@GRAD {} does not match X {}", dout.shape(), xt.shape());
  c.check(lt.shape() == xt.shape(), "Label {} must have X's shape {}", lt.shape(), xt.shape());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(xt.shape(), xt.dtype());
    const T *px = xt.data<T>(), *pl = lt.data<T>(), *pd = dout.data<T>();
    T* pdx = dx.data<T>();
    cuda_kernels::check(c, cuda_kernels::sigmoid_cross_entropy_grad(cuda_kernels::elem(c, xt.dtype()), px, pl, pd, pdx, xt.numel(), a.ignore_index,
                                                                    cuda_kernels::stream(c)));
  });
  dx.set_lod(xt.lod());
}

}  // namespace oar::ops
