// oar/ops/transpose.hpp: transpose, a permutation of a tensor's dims (a copy in the new layout).
#pragma once
#include <array>

#include "oar/ops/op.hpp"

namespace oar::ops {

/// out[i_axis[0], ..., i_axis[r-1]] = x[i_0, ..., i_{r-1}]: Out.shape[k] = X.shape[axis[k]].
/// X [2, 3, 4], {axis=[2, 0, 1]} -> Out [4, 2, 3]. Any dtype. Grad: X@GRAD = transpose(Out@GRAD, axis^-1).
struct Transpose {
  static constexpr std::string_view type = "transpose";
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Slot x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<std::vector<int32_t>> axis{"axis"};
  struct Attrs {
    std::vector<int32_t> axis;
    explicit Attrs(const AttrReader& r) : axis(r(Transpose::axis)) {}
  };
  static OpDef def() {
    return OpDef(type, "X with its dims permuted").in(x).out(out).required_attr(axis, "a permutation of 0..rank-1");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    auto perm = c.attr(axis);
    check_perm(c, xs, perm);
    Shape os;
    for (int32_t a : perm) os.push_back(xs[a]);
    c.set_output(out, os, c.dtype(x));
  }
  /// The permutation that undoes `perm` (the gradient's).
  static std::array<int32_t, Shape::kMaxRank> inverse(const std::vector<int32_t>& perm) {
    std::array<int32_t, Shape::kMaxRank> inv{};
    for (size_t k = 0; k < perm.size(); ++k) inv[size_t(perm[k])] = int32_t(k);
    return inv;
  }
  template <class Ctx>
  static void check_perm(const Ctx& c, const Shape& xs, const std::vector<int32_t>& perm) {
    c.check(int(perm.size()) == xs.rank(), "axis [{}] has {} entries but X {} has rank {}", fmt::join(perm, ", "), perm.size(), xs.str(), xs.rank());
    bool seen[Shape::kMaxRank] = {};  // perm has rank <= kMaxRank entries (checked above)
    for (int32_t a : perm) {
      c.check(a >= 0 && a < xs.rank() && !seen[a], "axis [{}] is not a permutation of 0..{}", fmt::join(perm, ", "), xs.rank() - 1);
      seen[a] = true;
    }
  }
  /// transpose_grad(X, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(x)) return {};
    return {g.default_grad(false)};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/transpose.hpp
  static void eval_cuda(KernelContext&, const Attrs&);      // kernels/cuda/tensor.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/transpose.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/tensor.hpp
};

}  // namespace oar::ops
