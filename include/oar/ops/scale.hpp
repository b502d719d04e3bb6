// oar/ops/scale.hpp: scale, Out = scale * X + bias (or scale * (X + bias) when bias_after_scale is false).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = scale * x + bias            (bias_after_scale = true, the default)
/// out = scale * (x + bias)          (bias_after_scale = false)
/// x: any shape -> the same shape and LoD. In place allowed (Out == X).
struct Scale {
  static constexpr std::string_view type = "scale";
  static constexpr Slot x{"X"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<float> scale{"scale"}, bias{"bias"};
  static constexpr Attr<bool> bias_after_scale{"bias_after_scale"};
  struct Attrs {
    float scale, bias;
    bool bias_after_scale;
    explicit Attrs(const AttrReader& r) : scale(r(Scale::scale)), bias(r(Scale::bias)), bias_after_scale(r(Scale::bias_after_scale)) {}
  };
  static OpDef def() {
    return OpDef(type, "Out = scale * X + bias, or scale * (X + bias)")
        .in(x).out(out)
        .attr(scale, 1.0f).attr(bias, 0.0f).attr(bias_after_scale, true);
  }
  static void infer_shape(InferShapeContext& c) {
    c.set_output(out, c.shape(x), c.dtype(x));
    c.share_lod(x, out);
  }
  /// scale_grad(Out@GRAD) -> X@GRAD = scale * Out@GRAD (the bias drops out). X itself is not needed.
  static std::vector<Operator> grad(const GradContext& g) { return {g.grad_op({.output_grads = {out}, .input_grads = {x}})}; }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/scale.hpp
  static void eval_cuda(KernelContext&, const Attrs&);      // kernels/cuda/elementwise.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/scale.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/elementwise.hpp
};

}  // namespace oar::ops
