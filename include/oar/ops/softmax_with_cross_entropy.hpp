// oar/ops/softmax_with_cross_entropy.hpp: softmax of Logits and its cross entropy against Label in one op,
// stable through log-sum-exp. Kernels in kernels/cpu/softmax_with_cross_entropy.hpp.
#pragma once
#include "oar/ops/cross_entropy.hpp"

namespace oar::ops {

/// softmax = exp(x - max) / sum(exp(x - max)); lse = max + log(sum(exp(x - max)))
/// hard: loss_i = lse_i - x[i, label_i] (0 where label_i == ignore_index); soft: loss_i = sum_j label_ij * (lse_i - x_ij)
/// logits: [N, D] (any rank >= 2, classes last), label: i64 [N, 1] or float [N, D] -> softmax [N, D], loss [N, 1].
struct SoftmaxWithCrossEntropy {
  static constexpr std::string_view type = "softmax_with_cross_entropy";
  static constexpr Slot logits{"Logits"}, label{"Label"}, softmax{"Softmax"}, loss{"Loss"};
  static constexpr Slot logits_grad{"Logits@GRAD"}, loss_grad{"Loss@GRAD"};
  static constexpr Attr<bool> soft_label{"soft_label"};
  static constexpr Attr<int32_t> ignore_index{"ignore_index"};

  /// What the kernels read, decoded once when a program is prepared.
  struct Attrs {
    bool soft_label;
    int32_t ignore_index;
    explicit Attrs(const AttrReader& r)
        : soft_label(r(SoftmaxWithCrossEntropy::soft_label)), ignore_index(r(SoftmaxWithCrossEntropy::ignore_index)) {}
  };

  static OpDef def() {
    return OpDef(type, "softmax of Logits, then cross entropy against Label")
        .in(logits).in(label).out(softmax).out(loss)
        .attr(soft_label, false, "Label is a distribution [N, D] instead of class indices [N, 1]")
        .attr(ignore_index, -100, "hard label that gives 0 loss and 0 gradient");
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(is_float(c.dtype(logits)), "Logits must be a floating-point tensor, got {}", name(c.dtype(logits)));
    detail::check_ce_label(c, logits, label, c.attr(soft_label));
    c.set_output(softmax, c.shape(logits), c.dtype(logits));
    c.set_output(loss, detail::ce_loss_shape(c.shape(logits)), c.dtype(logits));
    c.share_lod(logits, softmax);
    c.share_lod(logits, loss);
  }
  /// softmax_with_cross_entropy_grad(Label, Softmax, Loss@GRAD) -> Logits@GRAD = (softmax * sum(label) - label) * dloss
  /// (hard labels: softmax - onehot).
  static std::vector<Operator> grad(const GradContext& g) {
    return {g.grad_op({.inputs = {label}, .outputs = {softmax}, .output_grads = {loss}, .input_grads = {logits}})};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/softmax_with_cross_entropy.hpp
  static void eval_cuda(KernelContext&, const Attrs&);      // kernels/cuda/nn.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/softmax_with_cross_entropy.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/nn.hpp
};

}  // namespace oar::ops
