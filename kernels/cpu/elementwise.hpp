// kernels/cpu/elementwise.hpp: the one CPU launcher for the unary functors of kernels/functors.hpp, and the
// eval_cpu / eval_grad_cpu of every op in OAR_UNARY_OPS. Nothing here is written per op.
#pragma once
#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>
#include <type_traits>

#include "kernels/functors.hpp"
#include "oar/ops/elementwise.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::cpu_kernels {

inline constexpr int64_t kElementwiseGrain = 1 << 14;

/// The functor with the op's decoded parameters.
template <class F, class A>
F make_functor(const A& a) {
  F f;
  if constexpr (requires { f.a; }) f.a = a.a;
  if constexpr (requires { f.b; }) f.b = a.b;
  return f;
}

/// A functor's float form on Eigen arrays, for the functors whose scalar form calls libm per element: glibc's
/// erff and expf are not vectorized in a plain loop (only under -ffast-math), Eigen's packet erf and exp are.
/// The scalar functor stays the definition (the CUDA kernels and f64 use it); these agree with it to a few ulp.
template <class F>
struct FloatArrayForm {
  static constexpr bool has = false;
};

template <>
struct FloatArrayForm<fn::Gelu> {
  static constexpr bool has = true;
  using Map = Eigen::Map<Eigen::ArrayXf>;
  using CMap = Eigen::Map<const Eigen::ArrayXf>;
  static constexpr float kSqrtHalf = 0.70710678118654752440f, kInvSqrt2Pi = 0.39894228040143267794f, kSqrt2OverPi = 0.79788456080286535588f;
  static void forward(const fn::Gelu& f, const float* px, float* py, int64_t n) {
    CMap x(px, n);
    if (f.a != 0) Map(py, n) = 0.5f * x * (1.f + (kSqrt2OverPi * x * (1.f + 0.044715f * x.square())).tanh());
    else Map(py, n) = 0.5f * x * (1.f + (x * kSqrtHalf).erf());
  }
  static void backward(const fn::Gelu& f, const float* px, const float* pdy, float* pdx, int64_t n) {
    CMap x(px, n), dy(pdy, n);
    if (f.a != 0) {
      const Eigen::ArrayXf t = (kSqrt2OverPi * x * (1.f + 0.044715f * x.square())).tanh();
      Map(pdx, n) = dy * (0.5f * (1.f + t) + 0.5f * x * (1.f - t.square()) * kSqrt2OverPi * (1.f + 3 * 0.044715f * x.square()));
    } else {
      Map(pdx, n) = dy * (0.5f * (1.f + (x * kSqrtHalf).erf()) + x * kInvSqrt2Pi * (-0.5f * x.square()).exp());
    }
  }
};

/// Out = f(X). requires: X initialized. ensures: Out has X's shape and LoD. In-place allowed (Out == X).
template <class Op, class F>
void unary_forward(KernelContext& c, const typename Op::Attrs& a) {
  const F f = make_functor<F>(a);
  const LoDTensor& x = c.in(Op::x);
  LoDTensor& y = c.out(Op::out);
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    if (&y != &x) y.resize(x.shape(), x.dtype());
    const T* px = x.data<T>();
    T* py = y.data<T>();
    parallel_for(0, x.numel(), kElementwiseGrain, [&](int64_t lo, int64_t hi) {
      if constexpr (std::is_same_v<T, float> && FloatArrayForm<F>::has) FloatArrayForm<F>::forward(f, px + lo, py + lo, hi - lo);
      else
        for (int64_t i = lo; i < hi; ++i) py[i] = f(px[i]);
    });
  });
  if (&y != &x) y.set_lod(x.lod());
}

/// X@GRAD = f.grad(X, Out, Out@GRAD). Without X (an op whose derivative reads only Out, UnaryOp::grad_reads_x)
/// Out stands in for it.
template <class Op, class F>
void unary_backward(KernelContext& c, const typename Op::Attrs& a) {
  if (!c.has_out(Op::x_grad)) return;
  const F f = make_functor<F>(a);
  const LoDTensor& y = c.in(Op::out);
  const LoDTensor& x = c.has_in(Op::x) ? c.in(Op::x) : y;
  const LoDTensor& dy = c.in(Op::out_grad);
  LoDTensor& dx = c.out(Op::x_grad);
  c.check(dy.shape() == x.shape(), "Out@GRAD {} does not match X {}", dy.shape(), x.shape());
  c.dispatch_float([&](auto tag) {
    using T = typename decltype(tag)::type;
    dx.resize(x.shape(), x.dtype());
    const T *px = x.data<T>(), *py = y.data<T>(), *pdy = dy.data<T>();
    T* pdx = dx.data<T>();
    parallel_for(0, x.numel(), kElementwiseGrain, [&](int64_t lo, int64_t hi) {
      if constexpr (std::is_same_v<T, float> && FloatArrayForm<F>::has) {
        (void)py;
        FloatArrayForm<F>::backward(f, px + lo, pdy + lo, pdx + lo, hi - lo);
      } else {
        for (int64_t i = lo; i < hi; ++i) pdx[i] = f.grad(px[i], py[i], pdy[i]);
      }
    });
  });
  dx.set_lod(x.lod());
}

}  // namespace oar::cpu_kernels

namespace oar::ops {
#define OAR_DEFINE_UNARY_KERNELS(kind, type, Functor, a0, d0, a1, d1)                                                        \
  inline void Functor##Op::eval_cpu(KernelContext& c, const Attrs& a) { cpu_kernels::unary_forward<Functor##Op, fn::Functor>(c, a); } \
  inline void Functor##Op::eval_grad_cpu(KernelContext& c, const Attrs& a) {                                                 \
    cpu_kernels::unary_backward<Functor##Op, fn::Functor>(c, a);                                                           \
  }
OAR_UNARY_OPS(OAR_DEFINE_UNARY_KERNELS)
#undef OAR_DEFINE_UNARY_KERNELS
}  // namespace oar::ops
