// oar/ops/sign.hpp: sign, Out = -1, 0 or 1 by the sign of each element (used by L1 decay). Not differentiable.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = x > 0 ? 1 : (x < 0 ? -1 : 0)   (NaN stays NaN)
/// x: any shape -> the same shape and LoD.
struct Sign {
  static OpDef def() { return OpDef("sign", "element-wise sign of X").in("X").out("Out"); }
  static void infer_shape(InferShapeContext& c) {
    c.set_output("Out", c.shape("X"), c.dtype("X"));
    c.share_lod("X", "Out");
  }
  static void eval_cpu(KernelContext&);  // kernels/cpu/sign.hpp
};

}  // namespace oar::ops
