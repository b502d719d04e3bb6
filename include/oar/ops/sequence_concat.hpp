// oar/ops/sequence_concat.hpp: sequence_concat, sequence i of every input joined (in input order) into
// sequence i of the output (Fluid 1.0). Kernels in kernels/cpu/sequence_concat.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out sequence i = x0's sequence i, then x1's sequence i, ...; every X has one LoD level and the same number
/// of sequences, and the same dims after the first.
/// X[] [N_k, ...] with LoD [[...]] -> Out [sum N_k, ...], LoD [[sum over k of x_k's offsets]]. Any dtype.
/// Grad: sequence_concat_grad(X[], Out@GRAD) -> X@GRAD[] (each input's rows cut back out).
struct SequenceConcat {
  static constexpr std::string_view type = "sequence_concat";
  static constexpr Slot x{"X"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};

  static OpDef def() { return OpDef(type, "sequence i of every input joined into sequence i of Out").in(x, duplicable).out(out); }
  static void infer_shape(InferShapeContext& c) {
    const size_t n = c.num_inputs(x);
    const Shape& x0 = c.shape(x, 0);
    c.check(x0.rank() >= 1, "X[0] must have rank >= 1 (rows first), got {}", x0.str());
    Shape os = x0;
    for (size_t i = 0; i < n; ++i) {
      const Shape& xi = c.shape(x, i);
      c.check(c.lod_level(x, i) == 1, "X[{}] has {} LoD levels; sequence_concat joins inputs of exactly 1", i, c.lod_level(x, i));
      c.check(c.dtype(x, i) == c.dtype(x, 0), "X[{}] is {} but X[0] is {}", i, name(c.dtype(x, i)), name(c.dtype(x, 0)));
      bool ok = xi.rank() == x0.rank();
      for (int d = 1; ok && d < x0.rank(); ++d) ok = dims_compatible(xi[d], x0[d]);
      c.check(ok, "X[{}] {} differs from X[0] {} after the first dim", i, xi.str(), x0.str());
      if (i > 0) os[0] = os[0] < 0 || xi[0] < 0 ? -1 : os[0] + xi[0];
    }
    c.set_output(out, os, c.dtype(x, 0), 1);
  }
  /// sequence_concat_grad(X[], Out@GRAD) -> X@GRAD[]
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(x)) return {};
    auto dx = g.input_grad(x);
    Operator op = g.grad_op(GradContext::without_attrs);
    op.set_input(x, g.input(x)).set_input(out_grad, g.output_grad(out)).set_output(x_grad, dx);
    return {op};
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);       // kernels/cpu/sequence_concat.hpp
  static void eval_grad_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/sequence_concat.hpp
  static void eval_cuda(KernelContext&, const NoAttrs&);       // kernels/cuda/sequence_shape.hpp
  static void eval_grad_cuda(KernelContext&, const NoAttrs&);  // kernels/cuda/sequence_shape.hpp
};

}  // namespace oar::ops
