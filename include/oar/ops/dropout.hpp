// oar/ops/dropout.hpp: dropout with Fluid 1.x's two conventions (downgrade_in_infer: no rescale in training,
// x * (1 - p) at test; upscale_in_train: x / (1 - p) in training, x at test). Kernels in kernels/cpu/dropout.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// training: mask_i = (u_i >= p) with u_i ~ U[0, 1); out = x * mask (downgrade_in_infer) or x * mask / (1 - p)
/// (upscale_in_train; 0 when p == 1). test: out = x * (1 - p) (downgrade_in_infer) or x (upscale_in_train).
/// x: any shape -> out, mask: x's shape and dtype (at test the mask is all ones).
/// Seed: `seed` when fix_seed, else the executor's next seed; the stream does not depend on the thread count.
struct Dropout {
  static OpDef def() {
    return OpDef("dropout", "randomly zero elements of X with probability dropout_prob")
        .in("X").out("Out").out("Mask", intermediate)
        .attr("dropout_prob", 0.5f, "probability of dropping an element").check<float>([](float p) { return p >= 0 && p <= 1; }, "must be in [0, 1]")
        .attr("is_test", false, "inference: no randomness")
        .attr("fix_seed", false, "use `seed` instead of the executor's seed stream")
        .attr("seed", 0, "the seed when fix_seed")
        .attr("dropout_implementation", std::string("downgrade_in_infer"))
        .check<std::string>([](const std::string& s) { return s == "downgrade_in_infer" || s == "upscale_in_train"; },
                            "must be downgrade_in_infer or upscale_in_train");
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(is_float(c.dtype("X")), "X must be a floating-point tensor, got {}", name(c.dtype("X")));
    c.set_output("Out", c.shape("X"), c.dtype("X"));
    c.set_output("Mask", c.shape("X"), c.dtype("X"));
    c.share_lod("X", "Out");
  }
  /// dropout_grad(Mask, Out@GRAD) -> X@GRAD = dout * mask (/ (1 - p) for upscale_in_train; * (1 - p) at test for
  /// downgrade_in_infer).
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op("dropout_grad");
    op.set_input("Mask", g.output("Mask")).set_input("Out@GRAD", g.output_grad("Out"));
    op.set_output("X@GRAD", g.input_grad("X"));
    for (auto& [k, v] : g.fwd().attrs()) op.set_attr(k, v);
    op.set_origin(g.fwd().origin());
    return {op};
  }
  static void eval_cpu(KernelContext&);       // kernels/cpu/dropout.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/dropout.hpp
};

}  // namespace oar::ops
