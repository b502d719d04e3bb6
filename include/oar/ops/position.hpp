// oar/ops/position.hpp: where a Transformer's tokens are: add_position_encoding (Fluid's op: fixed sinusoids
// added to the input) and rotary_position_embedding (queries and keys rotated by their position, RoFormer's
// scheme). Positions count from each sequence's start: per row of a dense batch, per LoD sequence otherwise.
// Kernels in kernels/cpu/position.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// Out = alpha * X + beta * PE, PE(pos, k) = sin(pos * w_k) for k < D/2 and cos(pos * w_(k - D/2)) for
/// k >= D/2, w_k = 10000^(-k / (D/2)) (the sines in the first half of the features, the cosines in the second).
/// X: dense [B, T, D] (pos = t) or [N, D] with one LoD level (pos = the row within its sequence); D even.
struct AddPositionEncoding {
  static constexpr std::string_view type = "add_position_encoding";
  static constexpr Slot x{"X"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<float> alpha{"alpha"}, beta{"beta"};
  struct Attrs {
    float alpha, beta;
    explicit Attrs(const AttrReader& r) : alpha(r(AddPositionEncoding::alpha)), beta(r(AddPositionEncoding::beta)) {}
  };
  static OpDef def() {
    return OpDef(type, "Out = alpha * X + beta * sinusoids of each row's position in its sequence")
        .in(x).out(out).attr(alpha, 1.f, "multiplies X").attr(beta, 1.f, "multiplies the encoding");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& s = c.shape(x);
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    c.check(s.rank() == 3 || (s.rank() == 2 && c.lod_level(x) >= 1), "X must be [B, T, D] or [N, D] with a LoD, got {} (lod_level {})", s.str(),
            c.lod_level(x));
    c.check(s[s.rank() - 1] < 0 || s[s.rank() - 1] % 2 == 0, "the feature size D of X {} must be even (half sines, half cosines)", s.str());
    c.set_output(out, s, c.dtype(x));
    c.share_lod(x, out);
  }
  /// add_position_encoding_grad(Out@GRAD) -> X@GRAD = alpha * Out@GRAD.
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op(std::string(type) + "_grad");
    op.set_input(out_grad, g.output_grad(out)).set_output(x_grad, g.input_grad(x));
    for (auto& [k, v] : g.fwd().attrs()) op.set_attr(k, v);
    op.set_origin(g.fwd().origin());
    return {op};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/position.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/position.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/attention.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/attention.hpp
};

/// Each pair (x[2i], x[2i + 1]) of a head's features rotated by the angle (pos + offset) * base^(-2i / d):
/// attention scores between rotated queries and keys then depend on their relative position only.
/// X: dense [B, H, T, d] (pos = t) or [N, H, d] with one LoD level (pos = the row within its sequence); d even.
/// offset: the position of the first row (the tokens already in a decoder's cache).
struct RotaryPositionEmbedding {
  static constexpr std::string_view type = "rotary_position_embedding";
  static constexpr Slot x{"X"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<float> base{"base"};
  static constexpr Attr<int32_t> offset{"offset"};
  struct Attrs {
    float base;
    int32_t offset;
    explicit Attrs(const AttrReader& r) : base(r(RotaryPositionEmbedding::base)), offset(r(RotaryPositionEmbedding::offset)) {}
  };
  static OpDef def() {
    return OpDef(type, "rotate each feature pair of X by its row's position times its frequency")
        .in(x).out(out)
        .attr(base, 10000.f, "frequencies are base^(-2i/d)").check<float>([](float b) { return b > 1; }, "must be > 1")
        .attr(offset, 0, "added to every position").check<int32_t>([](int32_t o) { return o >= 0; }, "must be >= 0");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& s = c.shape(x);
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    c.check(s.rank() == 4 || (s.rank() == 3 && c.lod_level(x) >= 1), "X must be [B, H, T, d] or [N, H, d] with a LoD, got {} (lod_level {})", s.str(),
            c.lod_level(x));
    c.check(s[s.rank() - 1] < 0 || s[s.rank() - 1] % 2 == 0, "the head size d of X {} must be even (features rotate in pairs)", s.str());
    c.set_output(out, s, c.dtype(x));
    c.share_lod(x, out);
  }
  /// rotary_position_embedding_grad(X, Out@GRAD) -> X@GRAD: the same rotation backwards (X gives the positions:
  /// its LoD).
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op(std::string(type) + "_grad");
    op.set_input(x, g.input(x)).set_input(out_grad, g.output_grad(out)).set_output(x_grad, g.input_grad(x));
    for (auto& [k, v] : g.fwd().attrs()) op.set_attr(k, v);
    op.set_origin(g.fwd().origin());
    return {op};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/position.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/position.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/attention.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/attention.hpp
};

}  // namespace oar::ops
