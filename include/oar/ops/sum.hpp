// oar/ops/sum.hpp: sum, the element-wise sum of a list of same-shaped tensors (also how autodiff adds up the
// gradients of a variable used twice).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = x[0] + x[1] + ... + x[k-1]
/// x[i]: all the same shape -> that shape (LoD of x[0]). Out may be one of the inputs (in place).
/// Tensor arrays (all X arrays: the gradients of an array read at several indices) add up entry by entry: Out
/// is as long as the longest X, its entry j the sum of the non-empty entries j (empty when there are none).
struct Sum {
  static constexpr std::string_view type = "sum";
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Slot x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static OpDef def() { return OpDef(type, "element-wise sum of every input").in(x, duplicable).out(out); }
  static void infer_shape(InferShapeContext& c) {
    size_t n = c.num_inputs(x);
    c.check(n >= 1, "needs at least one input X");
    const bool arrays = c.input_var(x, 0).kind() == VarKind::lod_tensor_array;
    for (size_t i = 1; i < n; ++i)
      c.check((c.input_var(x, i).kind() == VarKind::lod_tensor_array) == arrays, "X[{}] ('{}') {} a tensor array but X[0] ('{}') {}", i,
              c.op().input(x)[i], arrays ? "is not" : "is", c.op().input(x)[0], arrays ? "is" : "is not");
    if (arrays) {  // entries differ in rows from index to index: only the dtype must agree
      for (size_t i = 1; i < n; ++i)
        c.check(c.dtype(x, i) == c.dtype(x, 0), "X[{}] is {} but X[0] is {}", i, name(c.dtype(x, i)), name(c.dtype(x, 0)));
      c.set_output(out, c.shape(x, 0), c.dtype(x, 0), c.lod_level(x, 0));
      c.output_var(out).set_kind(VarKind::lod_tensor_array);
      return;
    }
    Shape s = c.shape(x, 0);
    for (size_t i = 1; i < n; ++i) {
      const Shape& si = c.shape(x, i);
      c.check(c.dtype(x, i) == c.dtype(x, 0), "X[{}] is {} but X[0] is {}", i, name(c.dtype(x, i)), name(c.dtype(x, 0)));
      bool ok = si.rank() == s.rank();
      for (int d = 0; ok && d < s.rank(); ++d) ok = dims_compatible(s[d], si[d]);
      c.check(ok, "X[{}] {} does not have the shape of X[0] {}", i, si.str(), c.shape(x, 0).str());
      for (int d = 0; d < s.rank(); ++d)
        if (s[d] < 0) s[d] = si[d];
    }
    c.set_output(out, s, c.dtype(x, 0));
    c.share_lod(x, out);
  }
  /// sum_grad(X..., Out@GRAD) -> X@GRAD[i] = Out@GRAD for each i
  static std::vector<Operator> grad(const GradContext& g) { return {g.default_grad(false)}; }
  static void eval_cpu(KernelContext&, const NoAttrs&);       // kernels/cpu/sum.hpp
  static void eval_cuda(KernelContext&, const NoAttrs&);      // kernels/cuda/elementwise.hpp
  static void eval_grad_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/sum.hpp
  static void eval_grad_cuda(KernelContext&, const NoAttrs&);  // kernels/cuda/elementwise.hpp
};

}  // namespace oar::ops
