// oar/ops/arg_max.hpp: selection along an axis: arg_max and arg_min (Fluid's op types; the layers are
// argmax/argmin), the index of the largest / smallest element, and top_k, the k largest of each row.
#pragma once
#include "oar/ops/shape_ops.hpp"

namespace oar::ops {

namespace tensor_detail {
inline OpDef arg_def(const char* type, const char* doc) {
  return OpDef(type, doc).in("X").out("Out").attr("axis", int64_t(0), "negative counts from the back").attr("keepdims", false);
}
inline void arg_infer_shape(InferShapeContext& c) {
  const Shape& x = c.shape("X");
  DType t = c.dtype("X");
  c.check(t == DType::f32 || t == DType::f64 || t == DType::i32 || t == DType::i64, "X must be f32, f64, i32 or i64, got {}", name(t));
  c.check(x.rank() >= 1, "X must have rank >= 1, got {}", x.str());
  int axis = normalize_axis(c, c.attr<int64_t>("axis"), x.rank(), "axis", x);
  Shape out = x;
  if (c.attr<bool>("keepdims")) out[axis] = 1;
  else out.erase(axis);
  c.set_output("Out", out, DType::i64);
}
}  // namespace tensor_detail

/// out = the index of the largest x along `axis` (the first one on ties; NaN counts as largest).
/// X [N, C] f32/f64/i32/i64, {axis=1} -> Out [N] i64 ([N, 1] with keepdims). No gradient.
struct ArgMax {
  static OpDef def() { return tensor_detail::arg_def("arg_max", "index of the largest element along axis"); }
  static void infer_shape(InferShapeContext& c) { tensor_detail::arg_infer_shape(c); }
  static void eval_cpu(KernelContext&);  // kernels/cpu/arg_max.hpp
};

/// out = the index of the smallest x along `axis` (the first one on ties; NaN counts as smallest).
struct ArgMin {
  static OpDef def() { return tensor_detail::arg_def("arg_min", "index of the smallest element along axis"); }
  static void infer_shape(InferShapeContext& c) { tensor_detail::arg_infer_shape(c); }
  static void eval_cpu(KernelContext&);  // kernels/cpu/arg_max.hpp
};

/// out, indices = the k largest x along the last dim, sorted descending (lower index first on ties; NaN
/// counts as largest). X [..., C] f32/f64/i32/i64 -> Out [..., k] (X's dtype), Indices [..., k] i64. No gradient
/// (as Fluid 1.x).
struct TopK {
  static OpDef def() {
    return OpDef("top_k", "the k largest elements of each row and their indices")
        .in("X").out("Out").out("Indices")
        .attr("k", 1).check<int32_t>([](int v) { return v >= 1; }, "must be >= 1");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& x = c.shape("X");
    DType t = c.dtype("X");
    c.check(t == DType::f32 || t == DType::f64 || t == DType::i32 || t == DType::i64, "X must be f32, f64, i32 or i64, got {}", name(t));
    c.check(x.rank() >= 1, "X must have rank >= 1, got {}", x.str());
    int k = c.attr<int32_t>("k");
    int64_t last = x[x.rank() - 1];
    c.check(last < 0 || k <= last, "k = {} is more than the last dim of X {}", k, x.str());
    Shape out = x;
    out[out.rank() - 1] = k;
    c.set_output("Out", out, t);
    c.set_output("Indices", out, DType::i64);
    c.share_lod("X", "Out");
    c.share_lod("X", "Indices");
  }
  static void eval_cpu(KernelContext&);  // kernels/cpu/arg_max.hpp
};

}  // namespace oar::ops
