// oar/ops/sum.hpp: sum, the element-wise sum of a list of same-shaped tensors (also how autodiff adds up the
// gradients of a variable used twice).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = x[0] + x[1] + ... + x[k-1]
/// x[i]: all the same shape -> that shape (LoD of x[0]). Out may be one of the inputs (in place).
struct Sum {
  static OpDef def() { return OpDef("sum", "element-wise sum of every input").in("X", duplicable).out("Out"); }
  static void infer_shape(InferShapeContext& c) {
    size_t n = c.num_inputs("X");
    c.check(n >= 1, "needs at least one input X");
    Shape s = c.shape("X", 0);
    for (size_t i = 1; i < n; ++i) {
      const Shape& si = c.shape("X", i);
      c.check(c.dtype("X", i) == c.dtype("X", 0), "X[{}] is {} but X[0] is {}", i, name(c.dtype("X", i)), name(c.dtype("X", 0)));
      bool ok = si.rank() == s.rank();
      for (int d = 0; ok && d < s.rank(); ++d) ok = dims_compatible(s[d], si[d]);
      c.check(ok, "X[{}] {} does not have the shape of X[0] {}", i, si.str(), c.shape("X", 0).str());
      for (int d = 0; d < s.rank(); ++d)
        if (s[d] < 0) s[d] = si[d];
    }
    c.set_output("Out", s, c.dtype("X", 0));
    c.share_lod("X", "Out");
  }
  /// sum_grad(X..., Out@GRAD) -> X@GRAD[i] = Out@GRAD for each i
  static std::vector<Operator> grad(const GradContext& g) { return {g.default_grad(false)}; }
  static void eval_cpu(KernelContext&);       // kernels/cpu/sum.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/sum.hpp
};

}  // namespace oar::ops
