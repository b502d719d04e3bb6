// oar/ops/sequence_reshape.hpp: sequence_reshape, which re-cuts the rows of each sequence into rows of another
// width (the data stays in place; the LoD is rescaled). Kernels in kernels/cpu/sequence_reshape.hpp (every place).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// Each sequence's len * D elements become len * D / new_dim rows of new_dim; every sequence's element count
/// must divide by new_dim (an oar::Error names the first that does not).
/// x: [N, D] with LoD -> out: [N * D / new_dim, new_dim]; the last LoD level scaled by D / new_dim, the levels
/// above it kept. Grad: X@GRAD is Out@GRAD seen as [N, D] with X's LoD.
struct SequenceReshape {
  static constexpr std::string_view type = "sequence_reshape";
  /// Its kernels copy through the place and read only the LoD: they serve every place (runtime/kernel_registry.hpp).
  static constexpr bool any_place = true;
  static constexpr Slot x{"X"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<int32_t> new_dim{"new_dim"};

  /// What the kernels read, decoded once when a program is prepared.
  struct Attrs {
    int32_t new_dim;
    explicit Attrs(const AttrReader& r) : new_dim(r(SequenceReshape::new_dim)) {}
  };

  static OpDef def() {
    return OpDef(type, "re-cut each sequence's rows into rows of new_dim elements")
        .in(x).out(out)
        .required_attr(new_dim, "width of the output rows").check<int32_t>([](int32_t v) { return v >= 1; }, "must be >= 1");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    const int64_t nd = c.attr(new_dim);
    c.check(xs.rank() == 2, "X must be [N, D], got {}", xs.str());
    int64_t rows = -1;
    if (xs[0] >= 0 && xs[1] >= 0) {
      c.check(xs[0] * xs[1] % nd == 0, "X's {} elements do not split into rows of new_dim = {}", xs[0] * xs[1], nd);
      rows = xs[0] * xs[1] / nd;
    }
    c.set_output(out, Shape{rows, nd}, c.dtype(x));
    c.share_lod(x, out);
  }
  /// sequence_reshape_grad(X, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(x)) return {};
    return {g.grad_op({.inputs = {x}, .output_grads = {out}, .input_grads = {x}})};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/sequence_reshape.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/sequence_reshape.hpp
};

}  // namespace oar::ops
