// oar/ops/sign.hpp: sign, Out = -1, 0 or 1 by the sign of each element (used by L1 decay). Not differentiable.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = x > 0 ? 1 : (x < 0 ? -1 : 0)   (NaN stays NaN)
/// x: any shape -> the same shape and LoD.
struct Sign {
  static constexpr std::string_view type = "sign";
  static constexpr Slot x{"X"}, out{"Out"};
  static OpDef def() { return OpDef(type, "element-wise sign of X").in(x).out(out); }
  static void infer_shape(InferShapeContext& c) {
    c.set_output(out, c.shape(x), c.dtype(x));
    c.share_lod(x, out);
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);   // kernels/cpu/sign.hpp
  static void eval_cuda(KernelContext&, const NoAttrs&);  // kernels/cuda/clip_norm.hpp
};

}  // namespace oar::ops
