// oar/ops/softmax.hpp: softmax and log_softmax along one axis (Fluid 1.x: the last dim; `axis` picks another),
// numerically stable (the row's max is subtracted first). Kernels in kernels/cpu/softmax.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

namespace detail {
/// Shape inference shared by softmax and log_softmax (`Op`): Out has X's shape, dtype and LoD; axis in [-rank, rank).
template <class Op>
void softmax_infer_shape(InferShapeContext& c) {
  const Shape& x = c.shape(Op::x);
  int axis = c.attr(Op::axis);
  c.check(is_float(c.dtype(Op::x)), "X must be a floating-point tensor, got {}", name(c.dtype(Op::x)));
  c.check(x.rank() >= 1, "X must have rank >= 1, got {}", x.str());
  c.check(axis >= -x.rank() && axis < x.rank(), "axis = {} is out of range for X of rank {}", axis, x.rank());
  c.set_output(Op::out, x, c.dtype(Op::x));
  c.share_lod(Op::x, Op::out);
}
/// `<op>_grad(Out, Out@GRAD) -> X@GRAD`: both softmax grads need only the forward output.
template <class Op>
std::vector<Operator> softmax_family_grad(const GradContext& g) {
  Operator op = g.grad_op();
  op.set_input(Op::out, g.output(Op::out)).set_input(Op::out_grad, g.output_grad(Op::out));
  op.set_output(Op::x_grad, g.input_grad(Op::x));
  return {op};
}
}  // namespace detail

/// out = exp(x - max) / sum(exp(x - max)) along `axis`
/// x: [..., D, ...] -> same shape. Grad: dx = out * (dout - sum(dout * out)).
struct Softmax {
  static constexpr std::string_view type = "softmax";
  static constexpr Slot x{"X"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<int32_t> axis{"axis"};

  /// What the kernels read, decoded once when a program is prepared.
  struct Attrs {
    int32_t axis;
    explicit Attrs(const AttrReader& r) : axis(r(Softmax::axis)) {}
  };

  static OpDef def() { return OpDef(type, "softmax along `axis` (default: the last dim)").in(x).out(out).attr(axis, -1, "the dim to normalize over"); }
  static void infer_shape(InferShapeContext& c) { detail::softmax_infer_shape<Softmax>(c); }
  static std::vector<Operator> grad(const GradContext& g) { return detail::softmax_family_grad<Softmax>(g); }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/softmax.hpp
  static void eval_cuda(KernelContext&, const Attrs&);      // kernels/cuda/nn.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/softmax.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/nn.hpp
};

/// out = x - max - log(sum(exp(x - max))) along `axis`
/// x: [..., D, ...] -> same shape. Grad: dx = dout - exp(out) * sum(dout).
struct LogSoftmax {
  static constexpr std::string_view type = "log_softmax";
  static constexpr Slot x{"X"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<int32_t> axis{"axis"};

  /// What the kernels read, decoded once when a program is prepared.
  struct Attrs {
    int32_t axis;
    explicit Attrs(const AttrReader& r) : axis(r(LogSoftmax::axis)) {}
  };

  static OpDef def() {
    return OpDef(type, "log of softmax along `axis` (default: the last dim)").in(x).out(out).attr(axis, -1, "the dim to normalize over");
  }
  static void infer_shape(InferShapeContext& c) { detail::softmax_infer_shape<LogSoftmax>(c); }
  static std::vector<Operator> grad(const GradContext& g) { return detail::softmax_family_grad<LogSoftmax>(g); }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/softmax.hpp
  static void eval_cuda(KernelContext&, const Attrs&);      // kernels/cuda/nn.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/softmax.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/nn.hpp
};

}  // namespace oar::ops
