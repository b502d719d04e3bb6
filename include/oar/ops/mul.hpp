// oar/ops/mul.hpp: mul, the fully-connected product: X flattened to 2-D at x_num_col_dims, Y at
// y_num_col_dims, Out = X2 * Y2 reshaped to X's leading dims + Y's trailing dims.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = flatten(x, xd) * flatten(y, yd)
/// x: [d0..d(xd-1), rest...], y: [k..., n...] -> [d0..d(xd-1), y dims from yd on]
struct Mul {
  static OpDef def() {
    return OpDef("mul", "matrix product of X and Y, each flattened to 2-D")
        .in("X").in("Y").out("Out")
        .attr("x_num_col_dims", 1).check<int32_t>([](int v) { return v >= 1; }, "must be >= 1")
        .attr("y_num_col_dims", 1).check<int32_t>([](int v) { return v >= 1; }, "must be >= 1");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& x = c.shape("X");
    const Shape& y = c.shape("Y");
    int xd = c.attr<int32_t>("x_num_col_dims"), yd = c.attr<int32_t>("y_num_col_dims");
    c.check(x.rank() > xd, "x_num_col_dims = {} needs X of rank > {}, X is {}", xd, xd, x.str());
    c.check(y.rank() > yd - 1 && y.rank() >= 2, "y_num_col_dims = {} needs Y of rank >= 2 and > {}, Y is {}", yd, yd - 1, y.str());
    c.check(c.dtype("X") == c.dtype("Y"), "X is {} but Y is {}", name(c.dtype("X")), name(c.dtype("Y")));
    int64_t k1 = x.numel(xd, x.rank()), k2 = y.numel(0, yd);
    c.check(dims_compatible(k1, k2), "X {} flattened at {} has {} columns but Y {} flattened at {} has {} rows", x.str(), xd, k1, y.str(), yd, k2);
    Shape out = x.slice(0, xd);
    for (int i = yd; i < y.rank(); ++i) out.push_back(y[i]);
    c.set_output("Out", out, c.dtype("X"));
    c.share_lod("X", "Out");
  }
  /// mul_grad(X, Y, Out@GRAD) -> X@GRAD = dOut * Y^T, Y@GRAD = X^T * dOut
  static std::vector<Operator> grad(const GradContext& g) { return {g.default_grad(false)}; }
  static void eval_cpu(KernelContext&);       // kernels/cpu/mul.hpp
  static void eval_grad_cpu(KernelContext&);  // kernels/cpu/mul.hpp
};

}  // namespace oar::ops
