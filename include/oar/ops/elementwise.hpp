// oar/ops/elementwise.hpp: the unary element-wise ops (activations and math), one X-macro line each.
// An op here is: its functor in kernels/functors.hpp, one line below, one row in tests/ops/elementwise.cpp.
#pragma once
#include "oar/ops/op.hpp"

// X(op type, functor in kernels/functors.hpp, first float attribute + default, second + default);
// an empty attribute name means the op has none.
#define OAR_UNARY_OPS(X)                                   \
  X(relu, Relu, "", 0.f, "", 0.f)                          \
  X(sigmoid, Sigmoid, "", 0.f, "", 0.f)                    \
  X(tanh, Tanh, "", 0.f, "", 0.f)                          \
  X(exp, Exp, "", 0.f, "", 0.f)                            \
  X(log, Log, "", 0.f, "", 0.f)                            \
  X(sqrt, Sqrt, "", 0.f, "", 0.f)                          \
  X(abs, Abs, "", 0.f, "", 0.f)                            \
  X(square, Square, "", 0.f, "", 0.f)                      \
  X(reciprocal, Reciprocal, "", 0.f, "", 0.f)              \
  X(softplus, Softplus, "", 0.f, "", 0.f)                  \
  X(softsign, Softsign, "", 0.f, "", 0.f)                  \
  X(gelu, Gelu, "", 0.f, "", 0.f)                          \
  X(leaky_relu, LeakyRelu, "alpha", 0.02f, "", 0.f)        \
  X(elu, Elu, "alpha", 1.0f, "", 0.f)                      \
  X(relu6, Relu6, "threshold", 6.0f, "", 0.f)              \
  X(hard_sigmoid, HardSigmoid, "slope", 0.2f, "offset", 0.5f) \
  X(swish, Swish, "beta", 1.0f, "", 0.f)                   \
  X(pow, Pow, "factor", 1.0f, "", 0.f)                     \
  X(clip, Clip, "min", -1.0f, "max", 1.0f)

namespace oar::ops {

namespace detail {
inline OpDef unary_def(const char* type, const char* a0, float d0, const char* a1, float d1) {
  OpDef d(type, "element-wise: Out = f(X)");
  d.in("X").out("Out");
  if (*a0) d.attr(a0, d0);
  if (*a1) d.attr(a1, d1);
  return d;
}
inline void unary_infer_shape(InferShapeContext& c) {
  c.check(is_float(c.dtype("X")), "X must be a floating-point tensor, got {}", name(c.dtype("X")));
  c.set_output("Out", c.shape("X"), c.dtype("X"));
  c.share_lod("X", "Out");
}
/// <op>_grad(X, Out, Out@GRAD) -> X@GRAD
inline std::vector<Operator> unary_grad(const GradContext& g) {
  Operator op(g.fwd().type() + "_grad");
  op.set_input("X", g.input("X")).set_input("Out", g.output("Out")).set_input("Out@GRAD", g.output_grad("Out"));
  op.set_output("X@GRAD", g.input_grad("X"));
  for (auto& [k, v] : g.fwd().attrs()) op.set_attr(k, v);
  op.set_origin(g.fwd().origin());
  return {op};
}
}  // namespace detail

#define OAR_DECLARE_UNARY_OP(type, Functor, a0, d0, a1, d1)                                              \
  struct Functor##Op {                                                                                   \
    static OpDef def() { return detail::unary_def(#type, a0, d0, a1, d1); }                              \
    static void infer_shape(InferShapeContext& c) { detail::unary_infer_shape(c); }                      \
    static std::vector<Operator> grad(const GradContext& g) { return detail::unary_grad(g); }            \
    static void eval_cpu(KernelContext&);      /* kernels/cpu/elementwise.hpp */                         \
    static void eval_grad_cpu(KernelContext&); /* kernels/cpu/elementwise.hpp */                         \
  };
OAR_UNARY_OPS(OAR_DECLARE_UNARY_OP)
#undef OAR_DECLARE_UNARY_OP

}  // namespace oar::ops

namespace oar {
#define OAR_UNARY_OP_TYPE(type, Functor, a0, d0, a1, d1) ops::Functor##Op,
using UnaryOps = op_list<OAR_UNARY_OPS(OAR_UNARY_OP_TYPE) void>;
#undef OAR_UNARY_OP_TYPE
}  // namespace oar
