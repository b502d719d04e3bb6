// oar/ops/sequence_pad.hpp: sequence_pad (a LoD tensor to a dense [S, padded_length, ...] batch plus the
// lengths) and its inverse sequence_unpad. Kernels in kernels/cpu/sequence_pad.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out[s, t] = x[row t of sequence s] for t < len(s), else pad_value; length[s] = len(s). The sequences are
/// those of the first LoD level, in rows (Fluid's absolute offsets: deeper levels are flattened into them).
/// x: [N, step...] (rank >= 2) with LoD, pad_value: [1] or [step...] -> out: [S, P, step...] without LoD,
/// length: i64 [S]. P = padded_length, or the longest sequence when it is -1; a P shorter than the longest
/// sequence is an oar::Error. Grad: X@GRAD[row t of s] = Out@GRAD[s, t] (PadValue gets none).
struct SequencePad {
  static constexpr std::string_view type = "sequence_pad";
  static constexpr Slot x{"X"}, pad_value{"PadValue"}, out{"Out"}, length{"Length"};
  static constexpr Slot x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<int32_t> padded_length{"padded_length"};

  /// What the kernels read, decoded once when a program is prepared.
  struct Attrs {
    int32_t padded_length;
    explicit Attrs(const AttrReader& r) : padded_length(r(SequencePad::padded_length)) {}
  };

  static OpDef def() {
    return OpDef(type, "pad the sequences to a dense [S, padded_length, ...] batch")
        .in(x).in(pad_value).out(out).out(length)
        .attr(padded_length, -1, "steps per padded sequence; -1: the longest sequence's")
        .check<int32_t>([](int32_t v) { return v >= -1; }, "must be -1 or >= 0");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    const Shape& ps = c.shape(pad_value);
    c.check(c.dtype(pad_value) == c.dtype(x), "PadValue must have X's dtype {}, got {}", name(c.dtype(x)), name(c.dtype(pad_value)));
    c.check(xs.rank() >= 2, "X must be [N, step...] with rank >= 2, got {}", xs.str());
    const Shape step = xs.slice(1, xs.rank());
    // Unknown dims (PadValue's may be, like any input's) match anything here; the kernel checks the sizes.
    auto may_be = [&](const Shape& want) {
      bool ok = ps.rank() == want.rank();
      for (int i = 0; ok && i < ps.rank(); ++i) ok = dims_compatible(ps[i], want[i]);
      return ok;
    };
    c.check(may_be(Shape{1}) || may_be(step), "PadValue must be [1] or a step of X {}, got {}", step.str(), ps.str());
    std::vector<int64_t> os{-1, int64_t(c.attr(padded_length))};
    for (int i = 1; i < xs.rank(); ++i) os.push_back(xs[i]);
    c.set_output(out, Shape(os), c.dtype(x), 0);
    c.set_output(length, Shape{-1}, DType::i64, 0);
  }
  /// sequence_pad_grad(X, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(x)) return {};
    return {g.grad_op({.inputs = {x}, .output_grads = {out}, .input_grads = {x}})};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/sequence_pad.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/sequence_pad.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/sequence_shape.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/sequence_shape.hpp
};

/// out = the first length[s] steps of x[s], stacked, with LoD [[0, length[0], length[0] + length[1], ...]].
/// x: [S, L, step...] (rank >= 2), length: i64 [S] (each in [0, L], else an oar::Error naming it)
/// -> out: [sum(length), step...] with one LoD level. Grad: X@GRAD = Out@GRAD's rows in place, zeros elsewhere.
struct SequenceUnpad {
  static constexpr std::string_view type = "sequence_unpad";
  static constexpr Slot x{"X"}, length{"Length"}, out{"Out"};
  static constexpr Slot x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};

  static OpDef def() { return OpDef(type, "the first Length[s] steps of each padded sequence, as a LoD tensor").in(x).in(length).out(out); }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    const Shape& ls = c.shape(length);
    c.check(xs.rank() >= 2, "X must be [S, L, step...] with rank >= 2, got {}", xs.str());
    c.check(c.dtype(length) == DType::i64, "Length must be i64, got {}", name(c.dtype(length)));
    c.check(ls.rank() == 1, "Length must be [S], got {}", ls.str());
    c.check(ls[0] < 0 || xs[0] < 0 || ls[0] == xs[0], "Length has {} entries but X has {} sequences", ls[0], xs[0]);
    std::vector<int64_t> os{-1};
    for (int i = 2; i < xs.rank(); ++i) os.push_back(xs[i]);
    c.set_output(out, Shape(os), c.dtype(x), 1);
  }
  /// sequence_unpad_grad(X, Length, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(x)) return {};
    return {g.grad_op({.inputs = {x, length}, .output_grads = {out}, .input_grads = {x}})};
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);       // kernels/cpu/sequence_pad.hpp
  static void eval_grad_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/sequence_pad.hpp
  static void eval_cuda(KernelContext&, const NoAttrs&);       // kernels/cuda/sequence_shape.hpp
  static void eval_grad_cuda(KernelContext&, const NoAttrs&);  // kernels/cuda/sequence_shape.hpp
};

}  // namespace oar::ops
