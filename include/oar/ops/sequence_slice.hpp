// oar/ops/sequence_slice.hpp: sequence_slice, a sub-sequence of each sequence of a LoD tensor, at a per-sequence
// offset and length given as tensors. Kernels in kernels/cpu/sequence_slice.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out's sequence i = rows [offset[i], offset[i] + length[i]) of x's sequence i (of the last LoD level);
/// 0 <= offset, 0 <= length and offset + length <= the sequence's length, else an oar::Error naming i.
/// x: [N, ...] with LoD, offset, length: i64 [S, 1] (S = the sequences) -> out: [sum(length), ...] whose last
/// LoD level is the lengths' running sum (levels above it kept). Grad: X@GRAD is zeros with the sliced rows
/// taken from Out@GRAD; Offset and Length get none.
struct SequenceSlice {
  static constexpr std::string_view type = "sequence_slice";
  static constexpr Slot x{"X"}, offset{"Offset"}, length{"Length"}, out{"Out"};
  static constexpr Slot x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};

  static OpDef def() { return OpDef(type, "a sub-sequence of each sequence (Offset, Length: i64 [S, 1])").in(x).in(offset).in(length).out(out); }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    c.check(xs.rank() >= 1, "X must have rank >= 1, got {}", xs.str());
    for (Slot s : {offset, length}) {
      const Shape& ss = c.shape(s);
      c.check(c.dtype(s) == DType::i64, "{} must be i64, got {}", s.name, name(c.dtype(s)));
      c.check(ss.rank() == 2 && dims_compatible(ss[1], 1), "{} must be [S, 1] (one row per sequence), got {}", s.name, ss.str());
    }
    const int64_t so = c.shape(offset)[0], sl = c.shape(length)[0];
    c.check(so < 0 || sl < 0 || so == sl, "Offset has {} rows but Length has {}", so, sl);
    Shape os = xs;
    os[0] = -1;  // the lengths' sum: known at run time
    c.set_output(out, os, c.dtype(x));
    c.share_lod(x, out);
  }
  /// sequence_slice_grad(X, Offset, Length, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(x)) return {};
    return {g.grad_op({.inputs = {x, offset, length}, .output_grads = {out}, .input_grads = {x}})};
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);       // kernels/cpu/sequence_slice.hpp
  static void eval_grad_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/sequence_slice.hpp
  static void eval_cuda(KernelContext&, const NoAttrs&);       // kernels/cuda/sequence_shape.hpp
  static void eval_grad_cuda(KernelContext&, const NoAttrs&);  // kernels/cuda/sequence_shape.hpp
};

}  // namespace oar::ops
