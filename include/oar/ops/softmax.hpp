// oar/ops/softmax.hpp: softmax and log_softmax along one axis (Fluid 1.x: the last dim; `axis` picks another),
// numerically stable (the row's max is subtracted first). Kernels in kernels/cpu/softmax.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

namespace detail {
/// Shape inference shared by softmax and log_softmax: Out has X's shape, dtype and LoD; axis in [-rank, rank).
inline void softmax_infer_shape(InferShapeContext& c) {
  const Shape& x = c.shape("X");
  int axis = c.attr<int32_t>("axis");
  c.check(is_float(c.dtype("X")), "X must be a floating-point tensor, got {}", name(c.dtype("X")));
  c.check(x.rank() >= 1, "X must have rank >= 1, got {}", x.str());
  c.check(axis >= -x.rank() && axis < x.rank(), "axis = {} is out of range for X of rank {}", axis, x.rank());
  c.set_output("Out", x, c.dtype("X"));
  c.share_lod("X", "Out");
}
/// `<op>_grad(Out, Out@GRAD) -> X@GRAD`: both softmax grads need only the forward output.
inline std::vector<Operator> softmax_family_grad(const GradContext& g) {
  Operator op(g.fwd().type() + "_grad");
  op.set_input("Out", g.output("Out")).set_input("Out@GRAD", g.output_grad("Out"));
  op.set_output("X@GRAD", g.input_grad("X"));
  for (auto& [k, v] : g.fwd().attrs()) op.set_attr(k, v);
  op.set_origin(g.fwd().origin());
  return {op};
}
}  // namespace detail

/// out = exp(x - max) / sum(exp(x - max)) along `axis`
/// x: [..., D, ...] -> same shape. Grad: dx = out * (dout - sum(dout * out)).
struct Softmax {
  static OpDef def() {
    return OpDef("softmax", "softmax along `axis` (default: the last dim)").in("X").out("Out").attr("axis", -1, "the dim to normalize over");
  }
  static void infer_shape(InferShapeContext& c) { detail::softmax_infer_shape(c); }
  static std::vector<Operator> grad(const GradContext& g) { return detail::softmax_family_grad(g); }
  static void eval_cpu(KernelContext&);       // kernels/cpu/softmax.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/softmax.hpp
};

/// out = x - max - log(sum(exp(x - max))) along `axis`
/// x: [..., D, ...] -> same shape. Grad: dx = dout - exp(out) * sum(dout).
struct LogSoftmax {
  static OpDef def() {
    return OpDef("log_softmax", "log of softmax along `axis` (default: the last dim)").in("X").out("Out").attr("axis", -1, "the dim to normalize over");
  }
  static void infer_shape(InferShapeContext& c) { detail::softmax_infer_shape(c); }
  static std::vector<Operator> grad(const GradContext& g) { return detail::softmax_family_grad(g); }
  static void eval_cpu(KernelContext&);       // kernels/cpu/softmax.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/softmax.hpp
};

}  // namespace oar::ops
