// oar/ops/one_hot.hpp: one_hot, integer labels to one-hot rows.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out[i, j] = (x[i] == j). X i32/i64 [..., 1] -> Out [..., depth] of `dtype` (default f32; also f64, i32,
/// i64). A label outside [0, depth) is an oar::Error naming it. No gradient.
struct OneHot {
  static constexpr std::string_view type = "one_hot";
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Attr<int32_t> depth{"depth"}, dtype{"dtype"};
  /// `dtype` as a DType (its value is checked by the schema).
  struct Attrs {
    int32_t depth;
    DType dtype;
    explicit Attrs(const AttrReader& r) : depth(r(OneHot::depth)), dtype(DType(r(OneHot::dtype))) {}
  };
  static OpDef def() {
    return OpDef(type, "labels as one-hot rows")
        .in(x).out(out)
        .required_attr(depth).check<int32_t>([](int v) { return v >= 1; }, "must be >= 1")
        .attr(dtype, int32_t(DType::f32), "Out's element type (Fluid's VarType number)")
        .check<int32_t>([](int v) { return v == 2 || v == 3 || v == 5 || v == 6; }, "must be 2 (i32), 3 (i64), 5 (f32) or 6 (f64)");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    DType t = c.dtype(x);
    c.check(t == DType::i32 || t == DType::i64, "X must be i32 or i64, got {}", name(t));
    c.check(xs.rank() >= 1 && dims_compatible(xs[xs.rank() - 1], 1), "X must end in a dim of 1 ([N, 1]), got {}", xs.str());
    Shape os = xs;
    os[os.rank() - 1] = c.attr(depth);
    c.set_output(out, os, DType(c.attr(dtype)));
    c.share_lod(x, out);
  }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/one_hot.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/logic.hpp
};

}  // namespace oar::ops
