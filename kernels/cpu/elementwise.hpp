// kernels/cpu/elementwise.hpp: the one CPU launcher for the unary functors of kernels/functors.hpp, and the
// eval_cpu / eval_grad_cpu of every op in OAR_UNARY_OPS. Nothing here is written per op.
#pragma once
#include "kernels/functors.hpp"
#include "oar/ops/elementwise.hpp"
#include "oar/runtime/kernel_context.hpp"
#include "oar/runtime/thread_pool.hpp"

namespace oar::cpu_kernels {

inline constexpr int64_t kElementwiseGrain = 1 << 14;

template <class F>
F make_functor(const KernelContext& c, const char* a0, const char* a1) {
  F f;
  if (*a0) f.a = c.attr<float>(a0);
  if (*a1) f.b = c.attr<float>(a1);
  return f;
}

/// Out = f(X). requires: X initialized. ensures: Out has X's shape and LoD. In-place allowed (Out == X).
template <class F>
void unary_forward(KernelContext& c, const char* a0, const char* a1) {
  const F f = make_functor<F>(c, a0, a1);
  const LoDTensor& x = c.in("X");
  LoDTensor& y = c.out("Out");
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    if (&y != &x) y.resize(x.shape(), x.dtype());
    const T* px = x.data<T>();
    T* py = y.data<T>();
    parallel_for(0, x.numel(), kElementwiseGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) py[i] = f(px[i]);
    });
  });
  if (&y != &x) y.set_lod(x.lod());
}

/// X@GRAD = f.grad(X, Out, Out@GRAD).
template <class F>
void unary_backward(KernelContext& c, const char* a0, const char* a1) {
  if (!c.has_out("X@GRAD")) return;
  const F f = make_functor<F>(c, a0, a1);
  const LoDTensor& x = c.in("X");
  const LoDTensor& y = c.in("Out");
  const LoDTensor& dy = c.in("Out@GRAD");
  LoDTensor& dx = c.out("X@GRAD");
  c.check(dy.shape() == x.shape(), "Out@GRAD {} does not match X {}", dy.shape(), x.shape());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(x.shape(), x.dtype());
    const T *px = x.data<T>(), *py = y.data<T>(), *pdy = dy.data<T>();
    T* pdx = dx.data<T>();
    parallel_for(0, x.numel(), kElementwiseGrain, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) pdx[i] = f.grad(px[i], py[i], pdy[i]);
    });
  });
  dx.set_lod(x.lod());
}

}  // namespace oar::cpu_kernels

namespace oar::ops {
#define OAR_DEFINE_UNARY_KERNELS(type, Functor, a0, d0, a1, d1)                                                  \
  inline void Functor##Op::eval_cpu(KernelContext& c) { cpu_kernels::unary_forward<fn::Functor>(c, a0, a1); }            \
  inline void Functor##Op::eval_grad_cpu(KernelContext& c) { cpu_kernels::unary_backward<fn::Functor>(c, a0, a1); }
OAR_UNARY_OPS(OAR_DEFINE_UNARY_KERNELS)
#undef OAR_DEFINE_UNARY_KERNELS
}  // namespace oar::ops
