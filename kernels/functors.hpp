// kernels/functors.hpp: element-wise math written once as host+device scalar functors, shared by the CPU
// kernels and the CUDA kernels. Unary: y = f(x), grad(x, y, dy) = dy * f'(x). Binary: out = f(x, y) with
// dx(x, y, out, dout) and dy(...). `a` and `b` are the op's attributes as floats, a bool as 0 or 1 (see
// ops/unary_list.hpp).
#pragma once
#include <cmath>

#include "oar/config.hpp"

namespace oar::fn {

#define OAR_UNARY_FUNCTOR(Name, forward, backward)                  \
  struct Name {                                                     \
    float a = 0, b = 0;                                             \
    template <class T> OAR_HD T operator()(T x) const { forward; }  \
    template <class T> OAR_HD T grad(T x, T y, T dy) const {        \
      (void)x; (void)y;                                             \
      backward;                                                     \
    }                                                               \
  };

// NOTE: relu's derivative at 0 is taken as 0 (as Fluid does: dy * (y > 0)).
OAR_UNARY_FUNCTOR(Relu, return x > T(0) ? x : T(0), return y > T(0) ? dy : T(0))
OAR_UNARY_FUNCTOR(Sigmoid, return T(1) / (T(1) + std::exp(-x)), return dy * y * (T(1) - y))
OAR_UNARY_FUNCTOR(Tanh, return std::tanh(x), return dy * (T(1) - y * y))
OAR_UNARY_FUNCTOR(Exp, return std::exp(x), return dy * y)
OAR_UNARY_FUNCTOR(Log, return std::log(x), return dy / x)
OAR_UNARY_FUNCTOR(Sqrt, return std::sqrt(x), return dy * T(0.5) / y)
OAR_UNARY_FUNCTOR(Abs, return x < T(0) ? -x : x, return x > T(0) ? dy : (x < T(0) ? -dy : T(0)))
OAR_UNARY_FUNCTOR(Square, return x * x, return dy * T(2) * x)
OAR_UNARY_FUNCTOR(Reciprocal, return T(1) / x, return -dy * y * y)
// softplus (Paddle 2.x), a = beta, b = threshold: log(1 + e^(beta x)) / beta, and x itself where
// beta x > threshold; log(1 + e^v) is taken as v + log1p(e^-v) for v > 0 so a large threshold cannot overflow.
OAR_UNARY_FUNCTOR(Softplus,
                  {
                    T v = T(a) * x;
                    if (v > T(b)) return x;
                    return (v > T(0) ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v))) / T(a);
                  },
                  { T v = T(a) * x; return v > T(b) ? dy : dy / (T(1) + std::exp(-v)); })
OAR_UNARY_FUNCTOR(Softsign, return x / (T(1) + (x < T(0) ? -x : x)),
                  { T d = T(1) + (x < T(0) ? -x : x); return dy / (d * d); })
// gelu, a = approximate (0 or 1): x Phi(x) with the erf, or (a != 0) its tanh approximation
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), whose derivative is
// 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2) with t the tanh.
OAR_UNARY_FUNCTOR(Gelu,
                  {
                    if (a != 0) return T(0.5) * x * (T(1) + std::tanh(T(0.79788456080286535588) * x * (T(1) + T(0.044715) * x * x)));
                    return T(0.5) * x * (T(1) + std::erf(x * T(0.70710678118654752440)));
                  },
                  {
                    if (a != 0) {
                      T t = std::tanh(T(0.79788456080286535588) * x * (T(1) + T(0.044715) * x * x));
                      return dy * (T(0.5) * (T(1) + t) +
                                   T(0.5) * x * (T(1) - t * t) * T(0.79788456080286535588) * (T(1) + T(3 * 0.044715) * x * x));
                    }
                    return dy * (T(0.5) * (T(1) + std::erf(x * T(0.70710678118654752440))) +
                                 x * T(0.39894228040143267794) * std::exp(T(-0.5) * x * x));
                  })
// erf, d/dx = 2/sqrt(pi) e^(-x^2)
OAR_UNARY_FUNCTOR(Erf, return std::erf(x), return dy * T(1.12837916709551257390) * std::exp(-x * x))
// Rounding: piecewise constant, so the derivative is 0 (almost everywhere). round is ONNX's: ties to even.
OAR_UNARY_FUNCTOR(Floor, return std::floor(x), return T(0) * dy)
OAR_UNARY_FUNCTOR(Ceil, return std::ceil(x), return T(0) * dy)
OAR_UNARY_FUNCTOR(Round, return std::nearbyint(x), return T(0) * dy)
OAR_UNARY_FUNCTOR(Sin, return std::sin(x), return dy * std::cos(x))
OAR_UNARY_FUNCTOR(Cos, return std::cos(x), return -dy * std::sin(x))
OAR_UNARY_FUNCTOR(Tan, return std::tan(x), return dy * (T(1) + y * y))
OAR_UNARY_FUNCTOR(Asin, return std::asin(x), return dy / std::sqrt(T(1) - x * x))
OAR_UNARY_FUNCTOR(Acos, return std::acos(x), return -dy / std::sqrt(T(1) - x * x))
OAR_UNARY_FUNCTOR(Atan, return std::atan(x), return dy / (T(1) + x * x))
OAR_UNARY_FUNCTOR(Sinh, return std::sinh(x), return dy * std::cosh(x))
OAR_UNARY_FUNCTOR(Cosh, return std::cosh(x), return dy * std::sinh(x))
OAR_UNARY_FUNCTOR(Asinh, return std::asinh(x), return dy / std::sqrt(x * x + T(1)))
OAR_UNARY_FUNCTOR(Acosh, return std::acosh(x), return dy / std::sqrt(x * x - T(1)))
OAR_UNARY_FUNCTOR(Atanh, return std::atanh(x), return dy / (T(1) - x * x))
OAR_UNARY_FUNCTOR(LeakyRelu, return x > T(0) ? x : T(a) * x, return x > T(0) ? dy : T(a) * dy)
OAR_UNARY_FUNCTOR(Elu, return x > T(0) ? x : T(a) * (std::exp(x) - T(1)), return x > T(0) ? dy : dy * (y + T(a)))
OAR_UNARY_FUNCTOR(Relu6, return x < T(0) ? T(0) : (x > T(a) ? T(a) : x), return (x > T(0) && x < T(a)) ? dy : T(0))
OAR_UNARY_FUNCTOR(HardSigmoid, { T v = T(a) * x + T(b); return v < T(0) ? T(0) : (v > T(1) ? T(1) : v); },
                  { T v = T(a) * x + T(b); return (v > T(0) && v < T(1)) ? dy * T(a) : T(0); })
OAR_UNARY_FUNCTOR(Swish, return x / (T(1) + std::exp(-T(a) * x)),
                  { T s = T(1) / (T(1) + std::exp(-T(a) * x)); return dy * (s + T(a) * x * s * (T(1) - s)); })
OAR_UNARY_FUNCTOR(Pow, return std::pow(x, T(a)), return dy * T(a) * std::pow(x, T(a) - T(1)))
OAR_UNARY_FUNCTOR(Clip, return x < T(a) ? T(a) : (x > T(b) ? T(b) : x), return (x > T(a) && x < T(b)) ? dy : T(0))

#undef OAR_UNARY_FUNCTOR

}  // namespace oar::fn
