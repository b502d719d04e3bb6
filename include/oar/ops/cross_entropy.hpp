// oar/ops/cross_entropy.hpp: cross_entropy of probabilities X against hard (class index) or soft (distribution)
// labels, one loss per row. Kernels in kernels/cpu/cross_entropy.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

namespace detail {
/// Checks `label` against `xslot` ([..., D]) for hard (int [..., 1]) or soft (float [..., D]) labels. Sets nothing.
inline void check_ce_label(InferShapeContext& c, Slot xslot, Slot label, bool soft) {
  const Shape& x = c.shape(xslot);
  const Shape& l = c.shape(label);
  const std::string_view xn = xslot.name;
  c.check(x.rank() >= 2, "{} must have rank >= 2 ([N, D]), got {}", xn, x.str());
  c.check(l.rank() == x.rank(), "Label {} must have the rank of {} {}", l.str(), xn, x.str());
  for (int i = 0; i + 1 < x.rank(); ++i)
    c.check(dims_compatible(x[i], l[i]), "Label {} and {} {} differ in dim {}", l.str(), xn, x.str(), i);
  if (soft) {
    c.check(c.dtype(label) == c.dtype(xslot), "soft_label needs a Label of {}'s dtype {}, got {}", xn, name(c.dtype(xslot)), name(c.dtype(label)));
    c.check(dims_compatible(l[l.rank() - 1], x[x.rank() - 1]), "soft_label needs Label {} shaped like {} {}", l.str(), xn, x.str());
  } else {
    c.check(c.dtype(label) == DType::i64 || c.dtype(label) == DType::i32, "hard labels must be i64 (or i32), got {}", name(c.dtype(label)));
    c.check(dims_compatible(l[l.rank() - 1], 1), "hard labels must be [N, 1], got {}", l.str());
  }
}
/// X with its last dim set to 1.
inline Shape ce_loss_shape(const Shape& x) {
  Shape y = x;
  y[y.rank() - 1] = 1;
  return y;
}
}  // namespace detail

/// hard: y_i = -log(x[i, label_i]) (0 where label_i == ignore_index); soft: y_i = -sum_j label_ij * log(x_ij)
/// x: [N, D] (any rank >= 2, classes on the last dim), label: i64 [N, 1] or float [N, D] -> y: [N, 1].
/// log is clamped like Fluid's TolerableValue: -log(0) gives 1e20, not inf.
struct CrossEntropy {
  static constexpr std::string_view type = "cross_entropy";
  static constexpr Slot x{"X"}, label{"Label"}, y{"Y"}, x_grad{"X@GRAD"}, y_grad{"Y@GRAD"};
  static constexpr Attr<bool> soft_label{"soft_label"};
  static constexpr Attr<int32_t> ignore_index{"ignore_index"};

  /// What the kernels read, decoded once when a program is prepared.
  struct Attrs {
    bool soft_label;
    int32_t ignore_index;
    explicit Attrs(const AttrReader& r) : soft_label(r(CrossEntropy::soft_label)), ignore_index(r(CrossEntropy::ignore_index)) {}
  };

  static OpDef def() {
    return OpDef(type, "cross entropy of probabilities X against Label, per row")
        .in(x).in(label).out(y)
        .attr(soft_label, false, "Label is a distribution [N, D] instead of class indices [N, 1]")
        .attr(ignore_index, -100, "hard label that gives 0 loss and 0 gradient");
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    detail::check_ce_label(c, x, label, c.attr(soft_label));
    c.set_output(y, detail::ce_loss_shape(c.shape(x)), c.dtype(x));
    c.share_lod(x, y);
  }
  /// cross_entropy_grad(X, Label, Y@GRAD) -> X@GRAD: hard -dy/x at the label, soft -label * dy / x.
  static std::vector<Operator> grad(const GradContext& g) { return {g.grad_op({.inputs = {x, label}, .output_grads = {y}, .input_grads = {x}})}; }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/cross_entropy.hpp
  static void eval_cuda(KernelContext&, const Attrs&);      // kernels/cuda/nn.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/cross_entropy.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/nn.hpp
};

}  // namespace oar::ops
