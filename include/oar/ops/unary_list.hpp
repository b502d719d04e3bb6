// oar/ops/unary_list.hpp: the list of the unary element-wise ops, alone (no includes): the op structs
// (ops/elementwise.hpp), their CPU kernels (kernels/cpu/elementwise.hpp), the unary tokens of fused_elementwise
// (ops/fused_elementwise.hpp, kernels/cpu/fused_elementwise.hpp), the activation objects `oar::relu`...
// (layers/activations.hpp), what may extend an expression (layers/expr.hpp) and the CUDA build check of the
// functors (kernels/cuda/functors_check.cu, which nvcc compiles without the ir headers) are all generated from it.
// Adding an op takes: its functor in kernels/functors.hpp, one line below (its kind says what else it is),
// one row in tests/ops/elementwise.cpp; a `function` op also takes its layer function in layers/activations.hpp.
#pragma once

// X(kind, op type, functor in kernels/functors.hpp, first attribute + default, second + default);
// an empty attribute name means the op has none. An attribute's type is its default's: a float (0.5f) or a
// bool (false); either reaches the functor as a float (fn::F::a, b; a bool as 0 or 1). The kind says what
// else the op is:
//   fusable     an activation object `oar::<op type>` (layers/activations.hpp) AND a unary token of the
//               fused_elementwise expression grammar, so it may extend an expression (`oar::relu(a - b)`);
//               attributes ride on the token (`softplus:beta=2`, docs/expressions.md), the defaults when absent.
//   activation  an activation object `oar::<op type>` with attributes (`oar::elu.with("alpha", 0.5)`); not fusable.
//   function    neither: a layer function taking its attributes as arguments (`oar::pow(x, 2)`), hand-written
//               in layers/activations.hpp.
// The comment after a line is the doc of its `oar::` object. (Comments here must be /* */: a // comment would
// swallow the line continuation.)
#define OAR_UNARY_OPS(X)                                                                                                                \
  X(fusable,    relu,         Relu,        "",            0.f,   "",          0.f)   /* max(x, 0) */                                    \
  X(fusable,    sigmoid,      Sigmoid,     "",            0.f,   "",          0.f)   /* 1 / (1 + e^-x) */                               \
  X(fusable,    tanh,         Tanh,        "",            0.f,   "",          0.f)                                                      \
  X(fusable,    exp,          Exp,         "",            0.f,   "",          0.f)                                                      \
  X(fusable,    log,          Log,         "",            0.f,   "",          0.f)                                                      \
  X(fusable,    sqrt,         Sqrt,        "",            0.f,   "",          0.f)                                                      \
  X(fusable,    abs,          Abs,         "",            0.f,   "",          0.f)                                                      \
  X(fusable,    square,       Square,      "",            0.f,   "",          0.f)   /* x^2 */                                          \
  X(fusable,    reciprocal,   Reciprocal,  "",            0.f,   "",          0.f)   /* 1 / x */                                        \
  X(fusable,    softplus,     Softplus,    "beta",        1.0f,  "threshold", 20.0f) /* log(1 + e^(beta x)) / beta; x past threshold */ \
  X(fusable,    softsign,     Softsign,    "",            0.f,   "",          0.f)   /* x / (1 + |x|) */                                \
  X(fusable,    gelu,         Gelu,        "approximate", false, "",          0.f)   /* x Phi(x); approximate: its tanh form */         \
  X(fusable,    erf,          Erf,         "",            0.f,   "",          0.f)   /* the error function (ONNX's Erf) */              \
  X(fusable,    floor,        Floor,       "",            0.f,   "",          0.f)   /* round down (derivative 0) */                    \
  X(fusable,    ceil,         Ceil,        "",            0.f,   "",          0.f)   /* round up (derivative 0) */                      \
  X(fusable,    round,        Round,       "",            0.f,   "",          0.f)   /* to the nearest, ties to even (derivative 0) */  \
  X(fusable,    sin,          Sin,         "",            0.f,   "",          0.f)                                                      \
  X(fusable,    cos,          Cos,         "",            0.f,   "",          0.f)                                                      \
  X(fusable,    tan,          Tan,         "",            0.f,   "",          0.f)                                                      \
  X(fusable,    asin,         Asin,        "",            0.f,   "",          0.f)                                                      \
  X(fusable,    acos,         Acos,        "",            0.f,   "",          0.f)                                                      \
  X(fusable,    atan,         Atan,        "",            0.f,   "",          0.f)                                                      \
  X(fusable,    sinh,         Sinh,        "",            0.f,   "",          0.f)                                                      \
  X(fusable,    cosh,         Cosh,        "",            0.f,   "",          0.f)                                                      \
  X(fusable,    asinh,        Asinh,       "",            0.f,   "",          0.f)                                                      \
  X(fusable,    acosh,        Acosh,       "",            0.f,   "",          0.f)                                                      \
  X(fusable,    atanh,        Atanh,       "",            0.f,   "",          0.f)                                                      \
  X(activation, leaky_relu,   LeakyRelu,   "alpha",       0.02f, "",          0.f)   /* x > 0 ? x : alpha x (alpha 0.02) */             \
  X(activation, elu,          Elu,         "alpha",       1.0f,  "",          0.f)   /* x > 0 ? x : alpha (e^x - 1) */                  \
  X(activation, relu6,        Relu6,       "threshold",   6.0f,  "",          0.f)   /* min(max(x, 0), threshold) */                    \
  X(activation, hard_sigmoid, HardSigmoid, "slope",       0.2f,  "offset",    0.5f)  /* min(max(slope x + offset, 0), 1) */             \
  X(activation, swish,        Swish,       "beta",        1.0f,  "",          0.f)   /* x / (1 + e^(-beta x)) */                        \
  X(function,   pow,          Pow,         "factor",      1.0f,  "",          0.f)   /* x^factor */                                     \
  X(function,   clip,         Clip,        "min",         -1.0f, "max",       1.0f)  /* min(max(x, min), max) */

// Filters on the kind, for the X of a reader of the list: OAR_UNARY_IF_FUSABLE(kind, text) is `text` for a
// fusable op and nothing otherwise; OAR_UNARY_IF_ACTIVATION(kind, text) is `text` for a fusable op or an
// activation. A kind not listed here fails to compile.
#define OAR_UNARY_IF_FUSABLE(kind, ...) OAR_UNARY_IF_FUSABLE_##kind(__VA_ARGS__)
#define OAR_UNARY_IF_FUSABLE_fusable(...) __VA_ARGS__
#define OAR_UNARY_IF_FUSABLE_activation(...)
#define OAR_UNARY_IF_FUSABLE_function(...)
#define OAR_UNARY_IF_ACTIVATION(kind, ...) OAR_UNARY_IF_ACTIVATION_##kind(__VA_ARGS__)
#define OAR_UNARY_IF_ACTIVATION_fusable(...) __VA_ARGS__
#define OAR_UNARY_IF_ACTIVATION_activation(...) __VA_ARGS__
#define OAR_UNARY_IF_ACTIVATION_function(...)
