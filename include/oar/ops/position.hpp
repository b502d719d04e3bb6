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
/// Offset (dispensable, int64 [S]: one per sequence, or per batch row when dense): added to the positions of
/// that sequence (the tokens a decoder's cache already holds: kv_cache's Length).
struct AddPositionEncoding {
  static constexpr std::string_view type = "add_position_encoding";
  static constexpr Slot x{"X"}, offset{"Offset"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<float> alpha{"alpha"}, beta{"beta"};
  struct Attrs {
    float alpha, beta;
    explicit Attrs(const AttrReader& r) : alpha(r(AddPositionEncoding::alpha)), beta(r(AddPositionEncoding::beta)) {}
  };
  static OpDef def() {
    return OpDef(type, "Out = alpha * X + beta * sinusoids of each row's position in its sequence")
        .in(x).in(offset, dispensable, "int64 [S]: each sequence's first position").out(out)
        .attr(alpha, 1.f, "multiplies X").attr(beta, 1.f, "multiplies the encoding");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& s = c.shape(x);
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    c.check(s.rank() == 3 || (s.rank() == 2 && c.lod_level(x) >= 1), "X must be [B, T, D] or [N, D] with a LoD, got {} (lod_level {})", s.str(),
            c.lod_level(x));
    c.check(s[s.rank() - 1] < 0 || s[s.rank() - 1] % 2 == 0, "the feature size D of X {} must be even (half sines, half cosines)", s.str());
    if (c.has_input(offset)) c.check(c.dtype(offset) == DType::i64 && c.shape(offset).rank() == 1, "Offset must be int64 [S], got {} {}", name(c.dtype(offset)), c.shape(offset).str());
    c.set_output(out, s, c.dtype(x));
    c.share_lod(x, out);
  }
  /// add_position_encoding_grad(Out@GRAD) -> X@GRAD = alpha * Out@GRAD.
  static std::vector<Operator> grad(const GradContext& g) { return {g.grad_op({.output_grads = {out}, .input_grads = {x}})}; }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/position.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/position.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/attention.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/attention.hpp
};

/// Each pair (x[2i], x[2i + 1]) of a head's features rotated by the angle (pos + offset) * base^(-2i / d):
/// attention scores between rotated queries and keys then depend on their relative position only.
/// X: dense [B, H, T, d] (pos = t) or [N, H, d] with one LoD level (pos = the row within its sequence); d even.
/// offset: added to every position; Offset (dispensable, int64 [S], one per sequence or dense batch row): added
/// to that sequence's positions (the tokens already in a decoder's cache: kv_cache's Length).
struct RotaryPositionEmbedding {
  static constexpr std::string_view type = "rotary_position_embedding";
  static constexpr Slot x{"X"}, offset_in{"Offset"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<float> base{"base"};
  static constexpr Attr<int32_t> offset{"offset"};
  struct Attrs {
    float base;
    int32_t offset;
    explicit Attrs(const AttrReader& r) : base(r(RotaryPositionEmbedding::base)), offset(r(RotaryPositionEmbedding::offset)) {}
  };
  static OpDef def() {
    return OpDef(type, "rotate each feature pair of X by its row's position times its frequency")
        .in(x).in(offset_in, dispensable, "int64 [S]: each sequence's first position").out(out)
        .attr(base, 10000.f, "frequencies are base^(-2i/d)").check<float>([](float b) { return b > 1; }, "must be > 1")
        .attr(offset, 0, "added to every position").check<int32_t>([](int32_t o) { return o >= 0; }, "must be >= 0");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& s = c.shape(x);
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    c.check(s.rank() == 4 || (s.rank() == 3 && c.lod_level(x) >= 1), "X must be [B, H, T, d] or [N, H, d] with a LoD, got {} (lod_level {})", s.str(),
            c.lod_level(x));
    c.check(s[s.rank() - 1] < 0 || s[s.rank() - 1] % 2 == 0, "the head size d of X {} must be even (features rotate in pairs)", s.str());
    if (c.has_input(offset_in))
      c.check(c.dtype(offset_in) == DType::i64 && c.shape(offset_in).rank() == 1, "Offset must be int64 [S], got {} {}", name(c.dtype(offset_in)), c.shape(offset_in).str());
    c.set_output(out, s, c.dtype(x));
    c.share_lod(x, out);
  }
  /// rotary_position_embedding_grad(X, Offset?, Out@GRAD) -> X@GRAD: the same rotation backwards (X and Offset
  /// give the positions).
  static std::vector<Operator> grad(const GradContext& g) {
    Operator op = g.grad_op();
    op.set_input(x, g.input(x)).set_input(out_grad, g.output_grad(out)).set_output(x_grad, g.input_grad(x));
    if (!g.input(offset_in).empty()) op.set_input(offset_in, g.input(offset_in));
    return {op};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/position.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/position.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/attention.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/attention.hpp
};

}  // namespace oar::ops
