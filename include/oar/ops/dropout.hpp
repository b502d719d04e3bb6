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
  static constexpr std::string_view type = "dropout";
  static constexpr Slot x{"X"}, out{"Out"}, mask{"Mask"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<float> dropout_prob{"dropout_prob"};
  static constexpr Attr<bool> is_test = common::is_test, fix_seed{"fix_seed"};
  static constexpr Attr<int32_t> seed{"seed"};
  static constexpr Attr<std::string> dropout_implementation{"dropout_implementation"};

  enum class Implementation { downgrade_in_infer, upscale_in_train };

  /// What the kernels read, decoded once when a program is prepared (dropout_implementation is checked here).
  struct Attrs {
    float dropout_prob;
    bool is_test, fix_seed;
    int32_t seed;
    Implementation dropout_implementation;
    explicit Attrs(const AttrReader& r)
        : dropout_prob(r(Dropout::dropout_prob)),
          is_test(r(Dropout::is_test)),
          fix_seed(r(Dropout::fix_seed)),
          seed(r(Dropout::seed)),
          dropout_implementation(decode_implementation(r)) {}
  };
  /// What a kept element is multiplied by (in the forward and in the gradient): 1 - p at test time for
  /// downgrade_in_infer, 1 / (1 - p) in training for upscale_in_train (0 when p = 1), else 1.
  static double keep_scale(const Attrs& a) {
    const double p = a.dropout_prob;
    const bool upscale = a.dropout_implementation == Implementation::upscale_in_train;
    if (a.is_test) return upscale ? 1.0 : 1.0 - p;
    return upscale ? (p < 1 ? 1.0 / (1.0 - p) : 0.0) : 1.0;
  }
  static Implementation decode_implementation(const AttrReader& r) {
    const std::string s = r(Dropout::dropout_implementation);
    if (s == "downgrade_in_infer") return Implementation::downgrade_in_infer;
    if (s == "upscale_in_train") return Implementation::upscale_in_train;
    throw Error(fmt::format("{}: {} '{}' must be downgrade_in_infer or upscale_in_train", r.op().type(), Dropout::dropout_implementation.name, s),
                r.op().origin());
  }

  static OpDef def() {
    return OpDef(type, "randomly zero elements of X with probability dropout_prob")
        .in(x).out(out).out(mask, intermediate)
        .replayable_when([](const Operator& op) { return op.attr_or(fix_seed, false); })
        .attr(dropout_prob, 0.5f, "probability of dropping an element").check<float>([](float p) { return p >= 0 && p <= 1; }, "must be in [0, 1]")
        .attr(is_test, false, "inference: no randomness")
        .attr(fix_seed, false, "use `seed` instead of the executor's seed stream")
        .attr(seed, 0, "the seed when fix_seed")
        .attr(dropout_implementation, std::string("downgrade_in_infer"))
        .check<std::string>([](const std::string& s) { return s == "downgrade_in_infer" || s == "upscale_in_train"; },
                            "must be downgrade_in_infer or upscale_in_train");
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    c.set_output(out, c.shape(x), c.dtype(x));
    c.set_output(mask, c.shape(x), c.dtype(x));
    c.share_lod(x, out);
  }
  /// dropout_grad(Mask, Out@GRAD) -> X@GRAD = dout * mask (/ (1 - p) for upscale_in_train; * (1 - p) at test for
  /// downgrade_in_infer).
  static std::vector<Operator> grad(const GradContext& g) { return {g.grad_op({.outputs = {mask}, .output_grads = {out}, .input_grads = {x}})}; }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/dropout.hpp
  static void eval_cuda(KernelContext&, const Attrs&);      // kernels/cuda/nn.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/dropout.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/nn.hpp
};

}  // namespace oar::ops
