// oar/ops/one_hot.hpp: one_hot, integer labels to one-hot rows.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out[i, j] = (x[i] == j). X i32/i64 [..., 1] -> Out [..., depth] of `dtype` (default f32; also f64, i32,
/// i64). A label outside [0, depth) is an oar::Error naming it. No gradient.
struct OneHot {
  static OpDef def() {
    return OpDef("one_hot", "labels as one-hot rows")
        .in("X").out("Out")
        .required_attr<int32_t>("depth").check<int32_t>([](int v) { return v >= 1; }, "must be >= 1")
        .attr("dtype", int32_t(DType::f32), "Out's element type (Fluid's VarType number)")
        .check<int32_t>([](int v) { return v == 2 || v == 3 || v == 5 || v == 6; }, "must be 2 (i32), 3 (i64), 5 (f32) or 6 (f64)");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& x = c.shape("X");
    DType t = c.dtype("X");
    c.check(t == DType::i32 || t == DType::i64, "X must be i32 or i64, got {}", name(t));
    c.check(x.rank() >= 1 && dims_compatible(x[x.rank() - 1], 1), "X must end in a dim of 1 ([N, 1]), got {}", x.str());
    Shape out = x;
    out[out.rank() - 1] = c.attr<int32_t>("depth");
    c.set_output("Out", out, DType(c.attr<int32_t>("dtype")));
    c.share_lod("X", "Out");
  }
  static void eval_cpu(KernelContext&);  // kernels/cpu/one_hot.hpp
};

}  // namespace oar::ops
