// oar/ops/transpose.hpp: transpose, a permutation of a tensor's dims (a copy in the new layout).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out[i_axis[0], ..., i_axis[r-1]] = x[i_0, ..., i_{r-1}]: Out.shape[k] = X.shape[axis[k]].
/// X [2, 3, 4], {axis=[2, 0, 1]} -> Out [4, 2, 3]. Any dtype. Grad: X@GRAD = transpose(Out@GRAD, axis^-1).
struct Transpose {
  static OpDef def() {
    return OpDef("transpose", "X with its dims permuted").in("X").out("Out").required_attr<std::vector<int32_t>>("axis", "a permutation of 0..rank-1");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& x = c.shape("X");
    auto axis = c.attr<std::vector<int32_t>>("axis");
    check_perm(c, x, axis);
    Shape out;
    for (int32_t a : axis) out.push_back(x[a]);
    c.set_output("Out", out, c.dtype("X"));
  }
  template <class Ctx>
  static void check_perm(const Ctx& c, const Shape& x, const std::vector<int32_t>& axis) {
    c.check(int(axis.size()) == x.rank(), "axis [{}] has {} entries but X {} has rank {}", fmt::join(axis, ", "), axis.size(), x.str(), x.rank());
    std::vector<bool> seen(axis.size(), false);
    for (int32_t a : axis) {
      c.check(a >= 0 && a < x.rank() && !seen[size_t(a)], "axis [{}] is not a permutation of 0..{}", fmt::join(axis, ", "), x.rank() - 1);
      seen[size_t(a)] = true;
    }
  }
  /// transpose_grad(X, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (g.input_grad("X")[0] == kEmptyVarName) return {};
    return {g.default_grad(false)};
  }
  static void eval_cpu(KernelContext&);       // kernels/cpu/transpose.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/transpose.hpp
};

}  // namespace oar::ops
