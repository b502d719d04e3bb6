// kernels/cuda/elementwise.hpp: eval_cuda of the element-wise and small math ops: every unary and binary op
// (one launcher each, kernels/cuda/elementwise.cu, from the CPU's functors), scale, increment, fill_constant, sum, mean.
// Shapes, dtypes and attributes are checked here as the CPU kernels check them.
#pragma once
#include <cstring>

#include "kernels/common/sum.hpp"  // sum_inputs: the checks both devices make
#include "kernels/cuda/elementwise_launch.hpp"
#include "kernels/cuda/host.hpp"
#include "kernels/functors_binary.hpp"
#include "oar/ops/assign.hpp"
#include "oar/ops/elementwise.hpp"
#include "oar/ops/elementwise_binary.hpp"
#include "oar/ops/fill_constant.hpp"
#include "oar/ops/mean.hpp"
#include "oar/ops/scale.hpp"
#include "oar/ops/sum.hpp"

namespace oar::cuda_kernels {

template <class Op>
void unary_forward(KernelContext& c, Unary u, const typename Op::Attrs& a) {
  const LoDTensor& x = c.in(Op::x);
  LoDTensor& y = c.out(Op::out);
  const Elem t = elem(c, x.dtype());
  if (&y != &x) y.resize(x.shape(), x.dtype());
  check(c, unary(u, a.a, a.b, t, x.raw(), y.raw(), x.numel(), stream(c)));
  if (&y != &x) y.set_lod(x.lod());
}

template <class Op>
void unary_backward(KernelContext& c, Unary u, const typename Op::Attrs& a) {
  if (!c.has_out(Op::x_grad)) return;
  const LoDTensor& y = c.in(Op::out);
  const LoDTensor& x = c.has_in(Op::x) ? c.in(Op::x) : y;
  const LoDTensor& dy = c.in(Op::out_grad);
  LoDTensor& dx = c.out(Op::x_grad);
  c.check(dy.shape() == x.shape(), "Out@GRAD {} does not match X {}", dy.shape(), x.shape());
  const Elem t = elem(c, x.dtype());
  dx.resize(x.shape(), x.dtype());
  check(c, unary_grad(u, a.a, a.b, t, x.raw(), y.raw(), dy.raw(), dx.raw(), x.numel(), stream(c)));
  dx.set_lod(x.lod());
}

/// X's [pre, n, post] view against Y; an oar::Error naming the shapes when they do not broadcast.
inline Broadcast broadcast_of(const KernelContext& c, const Tensor& x, const Tensor& y, int axis) {
  c.check(x.dtype() == y.dtype(), "X is {} but Y is {}", name(x.dtype()), name(y.dtype()));
  if (x.shape() == y.shape()) return Broadcast{1, x.numel(), 1, true};
  ops::BroadcastDims b;
  const std::string why = ops::broadcast_dims(x.shape(), y.shape(), axis, b);
  c.check(why.empty(), "{}", why);
  if (b.same) return Broadcast{1, x.numel(), 1, true};
  return Broadcast{b.pre, b.n, b.post, false};
}

template <class F>
void binary_forward(KernelContext& c, Binary op, const ops::BinaryOp::Attrs& a) {
  using Op = ops::BinaryOp;
  const LoDTensor& x = c.in(Op::x);
  const LoDTensor& y = c.in(Op::y);
  LoDTensor& out = c.out(Op::out);
  const Broadcast b = broadcast_of(c, x, y, a.axis);
  c.check(&out != &y || b.same, "Out may share Y only when X and Y have the same shape (X {}, Y {})", x.shape(), y.shape());
  const Elem t = elem(c, x.dtype(), F::integer);
  if (&out != &x && &out != &y) out.resize(x.shape(), x.dtype());
  check(c, binary(op, t, b, x.raw(), y.raw(), out.raw(), stream(c)));
  if (&out != &x) out.set_lod(x.lod());
}

inline void binary_backward(KernelContext& c, Binary op, const ops::BinaryOp::Attrs& a) {
  using Op = ops::BinaryOp;
  const LoDTensor& x = c.in(Op::x);
  const LoDTensor& y = c.in(Op::y);
  const LoDTensor& dout = c.in(Op::out_grad);
  const Broadcast b = broadcast_of(c, x, y, a.axis);
  c.check(dout.shape() == x.shape(), "Out@GRAD {} does not match X {}", dout.shape(), x.shape());
  const Elem t = elem(c, x.dtype());
  LoDTensor* dx = c.out_if(Op::x_grad);
  LoDTensor* dy = c.out_if(Op::y_grad);
  if (dx) dx->resize(x.shape(), x.dtype());
  if (dy) dy->resize(y.shape(), y.dtype());
  Tensor ws = workspace(c, dy && !b.same ? channel_scratch_bytes(b.pre, b.n, b.post, 1) : 0);
  check(c, binary_grad(op, t, b, x.raw(), y.raw(), dout.raw(), dx ? dx->raw() : nullptr, dy ? dy->raw() : nullptr, ws.initialized() ? ws.raw() : nullptr,
                       stream(c)));
  if (dx) dx->set_lod(x.lod());
  if (dy) dy->set_lod(y.lod());
}

/// Fills `out` (shape x dtype, on the kernel's place) with `value` converted to the dtype, as the CPU kernel.
inline void fill_tensor(const KernelContext& c, LoDTensor& out, const Shape& shape, DType dtype, float value) {
  uint64_t bits = 0;
  auto put = [&](auto v) { std::memcpy(&bits, &v, sizeof v); };
  switch (dtype) {
    case DType::f32: put(value); break;
    case DType::f64: put(double(value)); break;
    case DType::i32: put(int32_t(value)); break;
    case DType::i64: put(int64_t(value)); break;
    case DType::i16: put(int16_t(value)); break;
    case DType::i8: put(int8_t(value)); break;
    case DType::u8: put(uint8_t(value)); break;
    case DType::boolean: put(uint8_t(value != 0.0f)); break;
    default: c.fail("no CUDA kernel for dtype {}", name(dtype));
  }
  out.resize(shape, dtype);
  check(c, fill(out.raw(), out.numel(), int(size_of(dtype)), bits, stream(c)));
}

}  // namespace oar::cuda_kernels

namespace oar::ops {

#define OAR_DEFINE_UNARY_CUDA(kind, type, Functor, a0, d0, a1, d1)                                          \
  inline void Functor##Op::eval_cuda(KernelContext& c, const Attrs& a) {                                    \
    cuda_kernels::unary_forward<Functor##Op>(c, cuda_kernels::Unary::Functor, a);                           \
  }                                                                                                         \
  inline void Functor##Op::eval_grad_cuda(KernelContext& c, const Attrs& a) {                               \
    cuda_kernels::unary_backward<Functor##Op>(c, cuda_kernels::Unary::Functor, a);                          \
  }
OAR_UNARY_OPS(OAR_DEFINE_UNARY_CUDA)
#undef OAR_DEFINE_UNARY_CUDA

#define OAR_DEFINE_BINARY_CUDA(type, Op, Functor)                                                                   \
  inline void Op::eval_cuda(KernelContext& c, const Attrs& a) {                                                     \
    cuda_kernels::binary_forward<fn::binary::Functor>(c, cuda_kernels::Binary::Functor, a);                         \
  }                                                                                                                 \
  inline void Op::eval_grad_cuda(KernelContext& c, const Attrs& a) { cuda_kernels::binary_backward(c, cuda_kernels::Binary::Functor, a); }
OAR_BINARY_OPS(OAR_DEFINE_BINARY_CUDA)
#undef OAR_DEFINE_BINARY_CUDA

inline void Scale::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype(), true);
  if (&ot != &xt) ot.resize(xt.shape(), xt.dtype());
  const double s = a.scale, b = a.bias_after_scale ? double(a.bias) : double(a.scale) * double(a.bias);
  cuda_kernels::check(c, cuda_kernels::scale(t, xt.raw(), ot.raw(), xt.numel(), s, b, cuda_kernels::stream(c)));
  if (&ot != &xt) ot.set_lod(xt.lod());
}

inline void Scale::eval_grad_cuda(KernelContext& c, const Attrs& a) {
  if (!c.has_out(x_grad)) return;
  const LoDTensor& dout = c.in(out_grad);
  LoDTensor& dx = c.out(x_grad);
  const cuda_kernels::Elem t = cuda_kernels::elem(c, dout.dtype());
  if (&dx != &dout) dx.resize(dout.shape(), dout.dtype());
  cuda_kernels::check(c, cuda_kernels::scale(t, dout.raw(), dx.raw(), dout.numel(), a.scale, 0.0, cuda_kernels::stream(c)));
  if (&dx != &dout) dx.set_lod(dout.lod());
}

inline void Increment::eval_cuda(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  LoDTensor& ot = c.out(out);
  c.check(xt.numel() == 1, "X must hold exactly one element, X is {}", xt.shape());
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype(), true);
  if (&ot != &xt) ot.resize(xt.shape(), xt.dtype());
  // An integer X adds the step cast to its type, as the CPU kernel does.
  const double step = is_float(xt.dtype()) ? double(a.step) : std::trunc(double(a.step));
  cuda_kernels::check(c, cuda_kernels::scale(t, xt.raw(), ot.raw(), 1, 1.0, step, cuda_kernels::stream(c)));
}

inline void FillConstant::eval_cuda(KernelContext& c, const Attrs& a) {
  LoDTensor& o = c.out(out);
  cuda_kernels::fill_tensor(c, o, a.shape, a.dtype, a.value);
  o.clear_lod();
}

inline void FillConstantBatchSizeLike::eval_cuda(KernelContext& c, const Attrs& a) {
  const Shape s = out_shape(c, a.shape, a.input_dim_idx, a.output_dim_idx, c.in(input).shape());
  LoDTensor& o = c.out(out);
  cuda_kernels::fill_tensor(c, o, s, a.dtype, a.value);
  o.clear_lod();
}

inline void Sum::eval_cuda(KernelContext& c, const NoAttrs&) {
  if (const Value* v = c.in_value(Sum::x, 0); v && v->is_list()) [[unlikely]]
    return kernels::array::sum(c);  // entry by entry, each added on the device
  const size_t k = c.num_in(Sum::x);
  const LoDTensor& x0 = c.in(Sum::x, 0);
  LoDTensor& o = c.out(Sum::out);
  size_t first = kernels::sum_inputs(c, o);  // the input Out aliases starts the sum; without one, X[0] is copied first
  const cuda_kernels::Elem t = cuda_kernels::elem(c, x0.dtype(), true);
  if (first == k) {
    o.resize(x0.shape(), x0.dtype());
    oar::detail::copy_bytes(o.raw(), c.place(), x0.raw(), c.place(), x0.bytes());
    first = 0;
  }
  for (size_t j = 0; j < k; ++j)
    if (j != first) cuda_kernels::check(c, cuda_kernels::accumulate(t, c.in(Sum::x, j).raw(), o.raw(), x0.numel(), cuda_kernels::stream(c)));
  if (&o != &x0) o.set_lod(x0.lod());
}

inline void Sum::eval_grad_cuda(KernelContext& c, const NoAttrs& a) { eval_grad_cpu(c, a); }  // copies, on any place

inline void Mean::eval_cuda(KernelContext& c, const NoAttrs&) {
  const LoDTensor& xt = c.in(Mean::x);
  LoDTensor& ot = c.out(Mean::out);
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype());
  ot.resize(Shape{1}, xt.dtype());
  cuda_kernels::check(c, cuda_kernels::mean(t, xt.raw(), ot.raw(), xt.numel(), cuda_kernels::stream(c)));
}

inline void Mean::eval_grad_cuda(KernelContext& c, const NoAttrs&) {
  if (!c.has_out(Mean::x_grad)) return;
  const LoDTensor& xt = c.in(Mean::x);
  const LoDTensor& dout = c.in(Mean::out_grad);
  LoDTensor& dx = c.out(Mean::x_grad);
  c.check(dout.numel() == 1, "Out@GRAD must hold one value, got {}", dout.shape());
  const cuda_kernels::Elem t = cuda_kernels::elem(c, xt.dtype());
  dx.resize(xt.shape(), xt.dtype());
  cuda_kernels::check(c, cuda_kernels::mean_grad(t, dout.raw(), dx.raw(), xt.numel(), cuda_kernels::stream(c)));
  dx.set_lod(xt.lod());
}

}  // namespace oar::ops
