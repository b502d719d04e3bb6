// oar/ops/conv2d_fusion.hpp: conv2d_fusion, Fluid's inference-time fusion of conv2d, the per-channel bias add
// and an activation into one op (what oar::fuse_for_inference writes for conv2d -> elementwise_add -> relu).
// The bias and the activation are applied while the convolution's result is still in cache, which saves the
// two passes over memory the separate ops make. Inference only: it has no gradient.
#pragma once
#include "oar/ops/conv2d.hpp"

namespace oar::ops {

/// Output = act(conv2d(Input, Filter) + Bias[m]) with Bias broadcast along the channel axis (axis 1).
/// Input: [N, C, H, W], Filter: [M, C/groups, kh, kw], Bias: [M]; activation "identity" or "relu".
struct Conv2dFusion {
  static OpDef def() {
    OpDef d = Conv2d::def();
    d.type = "conv2d_fusion";
    d.doc = "conv2d + channel bias + activation in one pass (inference)";
    d.in("Bias");
    d.attr("activation", std::string("relu"), "identity or relu, applied after the bias")
        .check<std::string>([](const std::string& a) { return a == "identity" || a == "relu"; }, "must be identity or relu");
    return d;
  }
  static void infer_shape(InferShapeContext& c) {
    Conv2d::infer_shape(c);
    const Shape& f = c.shape("Filter");
    const Shape& b = c.shape("Bias");
    c.check(b.rank() == 1 && dims_compatible(b[0], f[0]), "Bias must be [M] = [{}] for Filter {}, got {}", f[0], f.str(), b.str());
    c.check(c.dtype("Bias") == c.dtype("Input"), "Bias ({}) must have Input's type ({})", name(c.dtype("Bias")), name(c.dtype("Input")));
  }
  static void eval_cpu(KernelContext&);  // kernels/cpu/conv2d.hpp
};

}  // namespace oar::ops
