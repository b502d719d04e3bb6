// oar/ops/clip_by_norm.hpp: clip_by_norm, X rescaled so that its L2 norm is at most max_norm (gradient clipping).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = x * max_norm / max(||x||_2, max_norm)
/// x: any shape -> the same shape and LoD. Not differentiable (it runs on gradients).
struct ClipByNorm {
  static constexpr std::string_view type = "clip_by_norm";
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Attr<float> max_norm{"max_norm"};
  struct Attrs {
    float max_norm;
    explicit Attrs(const AttrReader& r) : max_norm(r(ClipByNorm::max_norm)) {}
  };
  static OpDef def() {
    return OpDef(type, "X * max_norm / max(norm(X), max_norm)")
        .in(x).out(out)
        .required_attr(max_norm).check<float>([](float v) { return v > 0; }, "must be > 0");
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    c.set_output(out, c.shape(x), c.dtype(x));
    c.share_lod(x, out);
  }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/clip_by_norm.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/clip_norm.hpp
};

}  // namespace oar::ops
