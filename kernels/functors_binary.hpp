// kernels/functors_binary.hpp: the binary element-wise math (elementwise_add .. elementwise_pow) written once as
// host+device scalar functors, shared by the CPU and CUDA kernels: out = f(x, y), dx(x, y, dout) = dout * df/dx,
// dy(x, y, dout) = dout * df/dy. `integer` says whether the op is defined on integer tensors too.
#pragma once
#include <cmath>
#include <type_traits>

#include "oar/config.hpp"

namespace oar::fn::binary {

#define OAR_BINARY_FUNCTOR(Name, ints, forward, grad_x, grad_y)                    \
  struct Name {                                                                     \
    static constexpr bool integer = ints;                                           \
    template <class T> OAR_HD T operator()(T x, T y) const { forward; }             \
    template <class T> OAR_HD T dx(T x, T y, T dout) const {                        \
      (void)x; (void)y;                                                             \
      grad_x;                                                                       \
    }                                                                               \
    template <class T> OAR_HD T dy(T x, T y, T dout) const {                        \
      (void)x; (void)y;                                                             \
      grad_y;                                                                       \
    }                                                                               \
  };

OAR_BINARY_FUNCTOR(Add, true, return x + y, return dout, return dout)
OAR_BINARY_FUNCTOR(Sub, true, return x - y, return dout, return -dout)
OAR_BINARY_FUNCTOR(Mul, true, return x * y, return dout * y, return dout * x)
OAR_BINARY_FUNCTOR(Div, false, return x / y, return dout / y, return -dout * x / (y * y))
// NOTE: at ties (x == y) max sends the gradient to Y and min sends it to Y, as Fluid does
// (dx = dout * (x > y), dy = dout * (x <= y)); the two halves always add up to dout.
OAR_BINARY_FUNCTOR(Max, true, return x > y ? x : y, return x > y ? dout : T(0), return x > y ? T(0) : dout)
OAR_BINARY_FUNCTOR(Min, true, return x < y ? x : y, return x < y ? dout : T(0), return x < y ? T(0) : dout)
// pow: d/dx = y x^(y-1), d/dy = ln(x) x^y (defined for x > 0).
OAR_BINARY_FUNCTOR(Pow, false, return T(std::pow(x, y)), return dout * y * T(std::pow(x, y - T(1))),
                   return dout * T(std::log(x)) * T(std::pow(x, y)))

#undef OAR_BINARY_FUNCTOR

}  // namespace oar::fn::binary
