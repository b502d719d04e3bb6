// oar/ops/clip_by_norm.hpp: clip_by_norm, X rescaled so that its L2 norm is at most max_norm (gradient clipping).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = x * max_norm / max(||x||_2, max_norm)
/// x: any shape -> the same shape and LoD. Not differentiable (it runs on gradients).
struct ClipByNorm {
  static OpDef def() {
    return OpDef("clip_by_norm", "X * max_norm / max(norm(X), max_norm)")
        .in("X").out("Out")
        .required_attr<float>("max_norm").check<float>([](float v) { return v > 0; }, "must be > 0");
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(is_float(c.dtype("X")), "X must be a floating-point tensor, got {}", name(c.dtype("X")));
    c.set_output("Out", c.shape("X"), c.dtype("X"));
    c.share_lod("X", "Out");
  }
  static void eval_cpu(KernelContext&);  // kernels/cpu/clip_by_norm.hpp
};

}  // namespace oar::ops
