// oar/ops/sequence_softmax.hpp: sequence_softmax, a softmax inside each last-level sequence of a column of
// scores (attention weights over a sentence). Kernels in kernels/cpu/sequence_softmax.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out[r] = exp(x[r] - m) / sum over the rows r' of r's sequence of exp(x[r'] - m), m the sequence's max.
/// X [N, 1] or [N] with LoD (last level [0, ..., N]) -> Out of X's shape and LoD. Empty sequences give nothing.
/// Grad: sequence_softmax_grad(Out, Out@GRAD) -> X@GRAD = out * (dout - sum over the sequence of dout * out).
struct SequenceSoftmax {
  static constexpr std::string_view type = "sequence_softmax";
  static constexpr Slot x{"X"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};

  static OpDef def() { return OpDef(type, "softmax inside each last-level sequence of a column X [N, 1]").in(x).out(out); }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    c.check(xs.rank() == 1 || (xs.rank() == 2 && dims_compatible(xs[1], 1)), "X must be [N, 1] or [N], got {}", xs.str());
    c.set_output(out, xs, c.dtype(x));
    c.share_lod(x, out);
  }
  /// sequence_softmax_grad(Out, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(x)) return {};
    return {g.grad_op({.outputs = {out}, .output_grads = {out}, .input_grads = {x}}, GradContext::without_attrs)};
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);       // kernels/cpu/sequence_softmax.hpp
  static void eval_grad_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/sequence_softmax.hpp
  static void eval_cuda(KernelContext&, const NoAttrs&);       // kernels/cuda/sequence.hpp
  static void eval_grad_cuda(KernelContext&, const NoAttrs&);  // kernels/cuda/sequence.hpp
};

}  // namespace oar::ops
