// oar/ops/sigmoid_cross_entropy_with_logits.hpp: element-wise logistic loss of logits X against float labels,
// stable for any x. Kernels in kernels/cpu/sigmoid_cross_entropy_with_logits.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = max(x, 0) - x * label + log(1 + exp(-|x|)); 0 where label == ignore_index
/// x, label: float, same shape -> out: same shape. Grad: dx = (sigmoid(x) - label) * dout.
struct SigmoidCrossEntropyWithLogits {
  static constexpr std::string_view type = "sigmoid_cross_entropy_with_logits";
  static constexpr Slot x{"X"}, label{"Label"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<int32_t> ignore_index{"ignore_index"};

  /// What the kernels read, decoded once when a program is prepared.
  struct Attrs {
    int32_t ignore_index;
    explicit Attrs(const AttrReader& r) : ignore_index(r(SigmoidCrossEntropyWithLogits::ignore_index)) {}
  };

  static OpDef def() {
    return OpDef(type, "element-wise logistic loss of logits X against Label in [0, 1]")
        .in(x).in(label).out(out)
        .attr(ignore_index, -100, "label value that gives 0 loss and 0 gradient");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    const Shape& l = c.shape(label);
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    c.check(c.dtype(label) == c.dtype(x), "Label must have X's dtype {}, got {}", name(c.dtype(x)), name(c.dtype(label)));
    bool same = xs.rank() == l.rank();
    for (int i = 0; same && i < xs.rank(); ++i) same = dims_compatible(xs[i], l[i]);
    c.check(same, "Label {} must have X's shape {}", l.str(), xs.str());
    c.set_output(out, xs, c.dtype(x));
    c.share_lod(x, out);
  }
  /// sigmoid_cross_entropy_with_logits_grad(X, Label, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) { return {g.grad_op({.inputs = {x, label}, .output_grads = {out}, .input_grads = {x}})}; }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/sigmoid_cross_entropy_with_logits.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/sigmoid_cross_entropy_with_logits.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/logic.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/logic.hpp
};

}  // namespace oar::ops
