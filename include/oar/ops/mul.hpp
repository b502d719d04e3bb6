// oar/ops/mul.hpp: mul, the fully-connected product: X flattened to 2-D at x_num_col_dims, Y at
// y_num_col_dims, Out = X2 * Y2 reshaped to X's leading dims + Y's trailing dims.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = flatten(x, xd) * flatten(y, yd)
/// x: [d0..d(xd-1), rest...], y: [k..., n...] -> [d0..d(xd-1), y dims from yd on]
struct Mul {
  static constexpr std::string_view type = "mul";
  static constexpr Slot x{"X"}, y{"Y"}, out{"Out"};
  static constexpr Slot x_grad{"X@GRAD"}, y_grad{"Y@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<int32_t> x_num_col_dims{"x_num_col_dims"}, y_num_col_dims{"y_num_col_dims"};

  /// What the kernels read, decoded once when a program is prepared.
  struct Attrs {
    int32_t x_num_col_dims, y_num_col_dims;
    explicit Attrs(const AttrReader& r) : x_num_col_dims(r(Mul::x_num_col_dims)), y_num_col_dims(r(Mul::y_num_col_dims)) {}
  };

  static OpDef def() {
    return OpDef(type, "matrix product of X and Y, each flattened to 2-D")
        .in(x).in(y).out(out)
        .attr(x_num_col_dims, 1).check<int32_t>([](int v) { return v >= 1; }, "must be >= 1")
        .attr(y_num_col_dims, 1).check<int32_t>([](int v) { return v >= 1; }, "must be >= 1");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    const Shape& ys = c.shape(y);
    int xd = c.attr(x_num_col_dims), yd = c.attr(y_num_col_dims);
    c.check(xs.rank() > xd, "x_num_col_dims = {} needs X of rank > {}, X is {}", xd, xd, xs.str());
    c.check(ys.rank() > yd - 1 && ys.rank() >= 2, "y_num_col_dims = {} needs Y of rank >= 2 and > {}, Y is {}", yd, yd - 1, ys.str());
    c.check(c.dtype(x) == c.dtype(y), "X is {} but Y is {}", name(c.dtype(x)), name(c.dtype(y)));
    int64_t k1 = xs.numel(xd, xs.rank()), k2 = ys.numel(0, yd);
    c.check(dims_compatible(k1, k2), "X {} flattened at {} has {} columns but Y {} flattened at {} has {} rows", xs.str(), xd, k1, ys.str(), yd, k2);
    Shape os = xs.slice(0, xd);
    for (int i = yd; i < ys.rank(); ++i) os.push_back(ys[i]);
    c.set_output(out, os, c.dtype(x));
    c.share_lod(x, out);
  }
  /// mul_grad(X, Y, Out@GRAD) -> X@GRAD = dOut * Y^T, Y@GRAD = X^T * dOut
  static std::vector<Operator> grad(const GradContext& g) { return {g.default_grad(false)}; }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/mul.hpp
  static void eval_cuda(KernelContext&, const Attrs&);      // kernels/cuda/nn.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/mul.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/nn.hpp
};

}  // namespace oar::ops
