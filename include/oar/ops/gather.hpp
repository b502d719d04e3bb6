// oar/ops/gather.hpp: gather, rows of X picked by an index vector.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out[i, ...] = x[index[i], ...]. X [R, ...], Index i32/i64 [M] or [M, 1] -> Out [M, ...]. Any dtype of X;
/// an index outside [0, R) is an oar::Error naming it. Grad: X@GRAD = zeros, then X@GRAD[index[i]] += Out@GRAD[i].
struct Gather {
  static constexpr std::string_view type = "gather";
  static constexpr Slot x{"X"}, index{"Index"}, out{"Out"};
  static constexpr Slot x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static OpDef def() { return OpDef(type, "rows of X at Index").in(x).in(index).out(out); }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    const Shape& idx = c.shape(index);
    DType it = c.dtype(index);
    c.check(it == DType::i32 || it == DType::i64, "Index must be i32 or i64, got {}", name(it));
    c.check(idx.rank() == 1 || (idx.rank() == 2 && dims_compatible(idx[1], 1)), "Index must be [M] or [M, 1], got {}", idx.str());
    c.check(xs.rank() >= 1, "X must have rank >= 1, got {}", xs.str());
    Shape os = xs;
    os[0] = idx[0];
    c.set_output(out, os, c.dtype(x));
  }
  /// gather_grad(X, Index, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(x)) return {};
    return {g.grad_op({.inputs = {x, index}, .output_grads = {out}, .input_grads = {x}}, GradContext::without_attrs)};
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);       // kernels/cpu/gather.hpp
  static void eval_cuda(KernelContext&, const NoAttrs&);      // kernels/cuda/nn.hpp
  static void eval_grad_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/gather.hpp
  static void eval_grad_cuda(KernelContext&, const NoAttrs&);  // kernels/cuda/nn.hpp
};

}  // namespace oar::ops
