// oar/ops/gather.hpp: gather, rows of X picked by an index vector.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out[i, ...] = x[index[i], ...]. X [R, ...], Index i32/i64 [M] or [M, 1] -> Out [M, ...]. Any dtype of X;
/// an index outside [0, R) is an oar::Error naming it. Grad: X@GRAD = zeros, then X@GRAD[index[i]] += Out@GRAD[i].
struct Gather {
  static OpDef def() { return OpDef("gather", "rows of X at Index").in("X").in("Index").out("Out"); }
  static void infer_shape(InferShapeContext& c) {
    const Shape& x = c.shape("X");
    const Shape& idx = c.shape("Index");
    DType it = c.dtype("Index");
    c.check(it == DType::i32 || it == DType::i64, "Index must be i32 or i64, got {}", name(it));
    c.check(idx.rank() == 1 || (idx.rank() == 2 && dims_compatible(idx[1], 1)), "Index must be [M] or [M, 1], got {}", idx.str());
    c.check(x.rank() >= 1, "X must have rank >= 1, got {}", x.str());
    Shape out = x;
    out[0] = idx[0];
    c.set_output("Out", out, c.dtype("X"));
  }
  /// gather_grad(X, Index, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (g.input_grad("X")[0] == kEmptyVarName) return {};
    Operator op("gather_grad");
    op.set_input("X", g.input("X")).set_input("Index", g.input("Index")).set_input("Out@GRAD", g.output_grad("Out"));
    op.set_output("X@GRAD", g.input_grad("X"));
    op.set_origin(g.fwd().origin());
    return {op};
  }
  static void eval_cpu(KernelContext&);       // kernels/cpu/gather.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/gather.hpp
};

}  // namespace oar::ops
