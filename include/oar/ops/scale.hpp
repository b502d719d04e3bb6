// oar/ops/scale.hpp: scale, Out = scale * X + bias (or scale * (X + bias) when bias_after_scale is false).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = scale * x + bias            (bias_after_scale = true, the default)
/// out = scale * (x + bias)          (bias_after_scale = false)
/// x: any shape -> the same shape and LoD. In place allowed (Out == X).
struct Scale {
  static OpDef def() {
    return OpDef("scale", "Out = scale * X + bias, or scale * (X + bias)")
        .in("X").out("Out")
        .attr("scale", 1.0f).attr("bias", 0.0f).attr("bias_after_scale", true);
  }
  static void infer_shape(InferShapeContext& c) {
    c.set_output("Out", c.shape("X"), c.dtype("X"));
    c.share_lod("X", "Out");
  }
  /// scale_grad(Out@GRAD) -> X@GRAD = scale * Out@GRAD (the bias drops out). X itself is not needed.
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op("scale_grad");
    op.set_input("Out@GRAD", g.output_grad("Out")).set_output("X@GRAD", g.input_grad("X"));
    for (auto& [k, v] : g.fwd().attrs()) op.set_attr(k, v);
    op.set_origin(g.fwd().origin());
    return {op};
  }
  static void eval_cpu(KernelContext&);       // kernels/cpu/scale.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/scale.hpp
};

}  // namespace oar::ops
