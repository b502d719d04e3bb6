// oar/ops/softmax_with_cross_entropy.hpp: softmax of Logits and its cross entropy against Label in one op,
// stable through log-sum-exp. Kernels in kernels/cpu/softmax_with_cross_entropy.hpp.
#pragma once
#include "oar/ops/cross_entropy.hpp"

namespace oar::ops {

/// softmax = exp(x - max) / sum(exp(x - max)); lse = max + log(sum(exp(x - max)))
/// hard: loss_i = lse_i - x[i, label_i] (0 where label_i == ignore_index); soft: loss_i = sum_j label_ij * (lse_i - x_ij)
/// logits: [N, D] (any rank >= 2, classes last), label: i64 [N, 1] or float [N, D] -> softmax [N, D], loss [N, 1].
struct SoftmaxWithCrossEntropy {
  static OpDef def() {
    return OpDef("softmax_with_cross_entropy", "softmax of Logits, then cross entropy against Label")
        .in("Logits").in("Label").out("Softmax").out("Loss")
        .attr("soft_label", false, "Label is a distribution [N, D] instead of class indices [N, 1]")
        .attr("ignore_index", -100, "hard label that gives 0 loss and 0 gradient");
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(is_float(c.dtype("Logits")), "Logits must be a floating-point tensor, got {}", name(c.dtype("Logits")));
    detail::check_ce_label(c, "Logits");
    c.set_output("Softmax", c.shape("Logits"), c.dtype("Logits"));
    c.set_output("Loss", detail::ce_loss_shape(c.shape("Logits")), c.dtype("Logits"));
    c.share_lod("Logits", "Softmax");
    c.share_lod("Logits", "Loss");
  }
  /// softmax_with_cross_entropy_grad(Label, Softmax, Loss@GRAD) -> Logits@GRAD = (softmax * sum(label) - label) * dloss
  /// (hard labels: softmax - onehot).
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op("softmax_with_cross_entropy_grad");
    op.set_input("Label", g.input("Label")).set_input("Softmax", g.output("Softmax")).set_input("Loss@GRAD", g.output_grad("Loss"));
    op.set_output("Logits@GRAD", g.input_grad("Logits"));
    for (auto& [k, v] : g.fwd().attrs()) op.set_attr(k, v);
    op.set_origin(g.fwd().origin());
    return {op};
  }
  static void eval_cpu(KernelContext&);       // kernels/cpu/softmax_with_cross_entropy.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/softmax_with_cross_entropy.hpp
};

}  // namespace oar::ops
