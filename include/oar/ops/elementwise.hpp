// oar/ops/elementwise.hpp: the unary element-wise ops (activations and math), one struct per line of the
// list in ops/unary_list.hpp.
#pragma once
#include "oar/ops/unary_list.hpp"
#include "oar/ops/op.hpp"

namespace oar::ops {

/// The names every unary element-wise op has; `P0`, `P1` are its attributes' names ("" for none), `T0`, `T1`
/// their types (float or bool).
template <const char* P0, class T0, const char* P1, class T1>
struct UnaryOp {
  static_assert((std::is_same_v<T0, float> || std::is_same_v<T0, bool>) && (std::is_same_v<T1, float> || std::is_same_v<T1, bool>),
                "a unary op's attribute is a float or a bool: its default in ops/unary_list.hpp is 0.5f or false");
  static constexpr Slot x{"X"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<T0> param0{P0};
  static constexpr Attr<T1> param1{P1};
  /// The functor's parameters (fn::*::a, b; a bool as 0 or 1); 0 for an op without them.
  struct Attrs {
    float a = 0, b = 0;
    explicit Attrs(const AttrReader& r) {
      if (*P0) a = float(r(param0));
      if (*P1) b = float(r(param1));
    }
  };
  static OpDef make_def(std::string_view type, T0 d0, T1 d1) {
    OpDef d(type, "element-wise: Out = f(X)");
    d.in(x).out(out);
    if (*P0) d.attr(param0, d0);
    if (*P1) d.attr(param1, d1);
    return d;
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    c.set_output(out, c.shape(x), c.dtype(x));
    c.share_lod(x, out);
  }
  /// Whether the derivative of unary op `type` reads X, not only Out (kernels/functors.hpp). Where it does not,
  /// the grad op gets no X, as in Fluid, so that X need not outlive the forward op: batch_norm(...).act(relu)
  /// then keeps one tensor for the backward pass, not two (ResNet-18 at batch 16: 100 MB less at the peak).
  static constexpr bool grad_reads_x(std::string_view type) {
    for (std::string_view t : {"relu", "sigmoid", "tanh", "exp", "sqrt", "reciprocal"})
      if (type == t) return false;
    return true;
  }
  /// <op>_grad(X, Out, Out@GRAD) -> X@GRAD; X only where the derivative reads it.
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op = g.grad_op();
    if (grad_reads_x(g.fwd().type())) op.set_input(x, g.input(x));
    op.set_input(out, g.output(out)).set_input(out_grad, g.output_grad(out));
    op.set_output(x_grad, g.input_grad(x));
    return {op};
  }
};

namespace unary_params {
#define OAR_UNARY_PARAM_NAMES(kind, op_type, Functor, a0, d0, a1, d1) inline constexpr char Functor##_p0[] = a0, Functor##_p1[] = a1;
OAR_UNARY_OPS(OAR_UNARY_PARAM_NAMES)
#undef OAR_UNARY_PARAM_NAMES
}  // namespace unary_params

// An attribute's type is its default's (decltype of the literal in the list).
#define OAR_DECLARE_UNARY_OP(kind, op_type, Functor, a0, d0, a1, d1)                                                     \
  struct Functor##Op : UnaryOp<unary_params::Functor##_p0, decltype(d0), unary_params::Functor##_p1, decltype(d1)> {   \
    static constexpr std::string_view type = #op_type;                                                                 \
    static OpDef def() { return make_def(type, d0, d1); }                                                              \
    static void eval_cpu(KernelContext&, const Attrs&);      /* kernels/cpu/elementwise.hpp */                         \
    static void eval_grad_cpu(KernelContext&, const Attrs&); /* kernels/cpu/elementwise.hpp */                         \
    static void eval_cuda(KernelContext&, const Attrs&);     /* kernels/cuda/elementwise.hpp */                        \
    static void eval_grad_cuda(KernelContext&, const Attrs&); /* kernels/cuda/elementwise.hpp */                       \
  };
OAR_UNARY_OPS(OAR_DECLARE_UNARY_OP)
#undef OAR_DECLARE_UNARY_OP

}  // namespace oar::ops

namespace oar {
#define OAR_UNARY_OP_TYPE(kind, type, Functor, a0, d0, a1, d1) ops::Functor##Op,
using UnaryOps = op_list<OAR_UNARY_OPS(OAR_UNARY_OP_TYPE) void>;
#undef OAR_UNARY_OP_TYPE
}  // namespace oar

