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
  static constexpr std::string_view type = "conv2d_fusion";
  // conv2d's slots and attributes, and the bias and the activation.
  static constexpr Slot input = Conv2d::input, filter = Conv2d::filter, output = Conv2d::output, bias{"Bias"};
  static constexpr Attr<std::vector<int32_t>> strides = Conv2d::strides, paddings = Conv2d::paddings, dilations = Conv2d::dilations;
  static constexpr Attr<int32_t> groups = Conv2d::groups;
  static constexpr Attr<std::string> data_format = Conv2d::data_format, activation{"activation"};

  enum class Activation { identity, relu };

  /// conv2d's window and the activation, decoded once when a program is prepared.
  struct Attrs : Conv2d::Attrs {
    Activation activation;
    explicit Attrs(const AttrReader& r) : Conv2d::Attrs(r), activation(decode_activation(r)) {}
  };
  static Activation decode_activation(const AttrReader& r) {
    const std::string a = r(Conv2dFusion::activation);
    if (a == "identity") return Activation::identity;
    if (a == "relu") return Activation::relu;
    throw Error(fmt::format("{}: activation '{}' must be identity or relu", r.op().type(), a), r.op().origin());
  }

  static OpDef def() {
    OpDef d = Conv2d::def();
    d.type = type;
    d.doc = "conv2d + channel bias + activation in one pass (inference)";
    d.in(bias);
    d.attr(activation, std::string("relu"), "identity or relu, applied after the bias")
        .check<std::string>([](const std::string& a) { return a == "identity" || a == "relu"; }, "must be identity or relu");
    return d;
  }
  static void infer_shape(InferShapeContext& c) {
    Conv2d::infer_shape(c);
    const Shape& f = c.shape(filter);
    const Shape& b = c.shape(bias);
    c.check(b.rank() == 1 && dims_compatible(b[0], f[0]), "Bias must be [M] = [{}] for Filter {}, got {}", f[0], f.str(), b.str());
    c.check(c.dtype(bias) == c.dtype(input), "Bias ({}) must have Input's type ({})", name(c.dtype(bias)), name(c.dtype(input)));
  }
  static void eval_cpu(KernelContext&, const Attrs&);   // kernels/cpu/conv2d.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/conv.hpp
};

}  // namespace oar::ops
