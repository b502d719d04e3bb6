// oar/ops/sigmoid_cross_entropy_with_logits.hpp: element-wise logistic loss of logits X against float labels,
// stable for any x. Kernels in kernels/cpu/sigmoid_cross_entropy_with_logits.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = max(x, 0) - x * label + log(1 + exp(-|x|)); 0 where label == ignore_index
/// x, label: float, same shape -> out: same shape. Grad: dx = (sigmoid(x) - label) * dout.
struct SigmoidCrossEntropyWithLogits {
  static OpDef def() {
    return OpDef("sigmoid_cross_entropy_with_logits", "element-wise logistic loss of logits X against Label in [0, 1]")
        .in("X").in("Label").out("Out")
        .attr("ignore_index", -100, "label value that gives 0 loss and 0 gradient");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& x = c.shape("X");
    const Shape& l = c.shape("Label");
    c.check(is_float(c.dtype("X")), "X must be a floating-point tensor, got {}", name(c.dtype("X")));
    c.check(c.dtype("Label") == c.dtype("X"), "Label must have X's dtype {}, got {}", name(c.dtype("X")), name(c.dtype("Label")));
    bool same = x.rank() == l.rank();
    for (int i = 0; same && i < x.rank(); ++i) same = dims_compatible(x[i], l[i]);
    c.check(same, "Label {} must have X's shape {}", l.str(), x.str());
    c.set_output("Out", x, c.dtype("X"));
    c.share_lod("X", "Out");
  }
  /// sigmoid_cross_entropy_with_logits_grad(X, Label, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op("sigmoid_cross_entropy_with_logits_grad");
    op.set_input("X", g.input("X")).set_input("Label", g.input("Label")).set_input("Out@GRAD", g.output_grad("Out"));
    op.set_output("X@GRAD", g.input_grad("X"));
    for (auto& [k, v] : g.fwd().attrs()) op.set_attr(k, v);
    op.set_origin(g.fwd().origin());
    return {op};
  }
  static void eval_cpu(KernelContext&);       // kernels/cpu/sigmoid_cross_entropy_with_logits.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/sigmoid_cross_entropy_with_logits.hpp
};

}  // namespace oar::ops
