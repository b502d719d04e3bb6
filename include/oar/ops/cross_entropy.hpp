// oar/ops/cross_entropy.hpp: cross_entropy of probabilities X against hard (class index) or soft (distribution)
// labels, one loss per row. Kernels in kernels/cpu/cross_entropy.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

namespace detail {
/// Checks Label against X ([..., D]) for hard (int [..., 1]) or soft (float [..., D]) labels. Sets nothing.
inline void check_ce_label(InferShapeContext& c, const char* xslot) {
  const Shape& x = c.shape(xslot);
  const Shape& l = c.shape("Label");
  bool soft = c.attr<bool>("soft_label");
  c.check(x.rank() >= 2, "{} must have rank >= 2 ([N, D]), got {}", xslot, x.str());
  c.check(l.rank() == x.rank(), "Label {} must have the rank of {} {}", l.str(), xslot, x.str());
  for (int i = 0; i + 1 < x.rank(); ++i)
    c.check(dims_compatible(x[i], l[i]), "Label {} and {} {} differ in dim {}", l.str(), xslot, x.str(), i);
  if (soft) {
    c.check(c.dtype("Label") == c.dtype(xslot), "soft_label needs a Label of {}'s dtype {}, got {}", xslot, name(c.dtype(xslot)), name(c.dtype("Label")));
    c.check(dims_compatible(l[l.rank() - 1], x[x.rank() - 1]), "soft_label needs Label {} shaped like {} {}", l.str(), xslot, x.str());
  } else {
    c.check(c.dtype("Label") == DType::i64 || c.dtype("Label") == DType::i32, "hard labels must be i64 (or i32), got {}", name(c.dtype("Label")));
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
  static OpDef def() {
    return OpDef("cross_entropy", "cross entropy of probabilities X against Label, per row")
        .in("X").in("Label").out("Y")
        .attr("soft_label", false, "Label is a distribution [N, D] instead of class indices [N, 1]")
        .attr("ignore_index", -100, "hard label that gives 0 loss and 0 gradient");
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(is_float(c.dtype("X")), "X must be a floating-point tensor, got {}", name(c.dtype("X")));
    detail::check_ce_label(c, "X");
    c.set_output("Y", detail::ce_loss_shape(c.shape("X")), c.dtype("X"));
    c.share_lod("X", "Y");
  }
  /// cross_entropy_grad(X, Label, Y@GRAD) -> X@GRAD: hard -dy/x at the label, soft -label * dy / x.
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op("cross_entropy_grad");
    op.set_input("X", g.input("X")).set_input("Label", g.input("Label")).set_input("Y@GRAD", g.output_grad("Y"));
    op.set_output("X@GRAD", g.input_grad("X"));
    for (auto& [k, v] : g.fwd().attrs()) op.set_attr(k, v);
    op.set_origin(g.fwd().origin());
    return {op};
  }
  static void eval_cpu(KernelContext&);       // kernels/cpu/cross_entropy.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/cross_entropy.hpp
};

}  // namespace oar::ops
