// oar/ops/arg_max.hpp: selection along an axis: arg_max and arg_min (Fluid's op types; the layers are
// argmax/argmin), the index of the largest / smallest element, and top_k, the k largest of each row.
#pragma once
#include "oar/ops/shape_ops.hpp"

namespace oar::ops {

namespace tensor_detail {
/// The names arg_max and arg_min share.
struct ArgNames {
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Attr<int64_t> axis{"axis"};
  static constexpr Attr<bool> keepdims{"keepdims"};
};
struct ArgAttrs {
  int64_t axis;
  bool keepdims;
  explicit ArgAttrs(const AttrReader& r) : axis(r(ArgNames::axis)), keepdims(r(ArgNames::keepdims)) {}
};
inline OpDef arg_def(std::string_view type, const char* doc) {
  return OpDef(type, doc).in(ArgNames::x).out(ArgNames::out).attr(ArgNames::axis, int64_t(0), "negative counts from the back").attr(ArgNames::keepdims, false);
}
inline void arg_infer_shape(InferShapeContext& c) {
  const Shape& x = c.shape(ArgNames::x);
  DType t = c.dtype(ArgNames::x);
  c.check(t == DType::f32 || t == DType::f64 || t == DType::i32 || t == DType::i64, "X must be f32, f64, i32 or i64, got {}", name(t));
  c.check(x.rank() >= 1, "X must have rank >= 1, got {}", x.str());
  int axis = normalize_axis(c, c.attr(ArgNames::axis), x.rank(), ArgNames::axis, x);
  Shape out = x;
  if (c.attr(ArgNames::keepdims)) out[axis] = 1;
  else out.erase(axis);
  c.set_output(ArgNames::out, out, DType::i64);
}
}  // namespace tensor_detail

/// out = the index of the largest x along `axis` (the first one on ties; NaN counts as largest).
/// X [N, C] f32/f64/i32/i64, {axis=1} -> Out [N] i64 ([N, 1] with keepdims). No gradient.
struct ArgMax : tensor_detail::ArgNames {
  static constexpr std::string_view type = "arg_max";
  using Attrs = tensor_detail::ArgAttrs;
  static OpDef def() { return tensor_detail::arg_def(type, "index of the largest element along axis"); }
  static void infer_shape(InferShapeContext& c) { tensor_detail::arg_infer_shape(c); }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/arg_max.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/nn.hpp
};

/// out = the index of the smallest x along `axis` (the first one on ties; NaN counts as smallest).
struct ArgMin : tensor_detail::ArgNames {
  static constexpr std::string_view type = "arg_min";
  using Attrs = tensor_detail::ArgAttrs;
  static OpDef def() { return tensor_detail::arg_def(type, "index of the smallest element along axis"); }
  static void infer_shape(InferShapeContext& c) { tensor_detail::arg_infer_shape(c); }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/arg_max.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/nn.hpp
};

/// out, indices = the k largest x along the last dim, sorted descending (lower index first on ties; NaN
/// counts as largest). X [..., C] f32/f64/i32/i64 -> Out [..., k] (X's dtype), Indices [..., k] i64. No gradient
/// (as Fluid 1.x).
struct TopK {
  static constexpr std::string_view type = "top_k";
  static constexpr Slot x{"X"}, out{"Out"}, indices{"Indices"};
  static constexpr Attr<int32_t> k{"k"};
  struct Attrs {
    int32_t k;
    explicit Attrs(const AttrReader& r) : k(r(TopK::k)) {}
  };
  static OpDef def() {
    return OpDef(type, "the k largest elements of each row and their indices")
        .in(x).out(out).out(indices)
        .attr(k, 1).check<int32_t>([](int v) { return v >= 1; }, "must be >= 1");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    DType t = c.dtype(x);
    c.check(t == DType::f32 || t == DType::f64 || t == DType::i32 || t == DType::i64, "X must be f32, f64, i32 or i64, got {}", name(t));
    c.check(xs.rank() >= 1, "X must have rank >= 1, got {}", xs.str());
    int kv = c.attr(k);
    int64_t last = xs[xs.rank() - 1];
    c.check(last < 0 || kv <= last, "k = {} is more than the last dim of X {}", kv, xs.str());
    Shape os = xs;
    os[os.rank() - 1] = kv;
    c.set_output(out, os, t);
    c.set_output(indices, os, DType::i64);
    c.share_lod(x, out);
    c.share_lod(x, indices);
  }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/arg_max.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/nn.hpp
};

}  // namespace oar::ops
