// oar/ops/fill_constant.hpp: fill_constant (a tensor of `shape` filled with `value`) and
// fill_constant_batch_size_like (the same, with one dim taken from an input's batch).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

namespace tensor_detail {
/// Checks a `dtype` attribute given as Fluid's VarType number.
inline bool valid_dtype_attr(int32_t v) { return is_valid_dtype(v); }
inline OpDef& fill_attrs(OpDef& d) {
  return d.attr("dtype", int32_t(DType::f32), "element type as Fluid's VarType number (5 = f32)")
      .check<int32_t>(valid_dtype_attr, "is not a dtype (0 bool, 2 i32, 3 i64, 5 f32, 6 f64, ...)")
      .attr("value", 0.0f, "the fill value")
      .attr("force_cpu", false, "Fluid compatibility; ignored");
}
}  // namespace tensor_detail

/// out = value everywhere.  {shape: [d...], dtype} -> Out [d...] of dtype.
/// Example: fill_constant {shape=[2,3], dtype=5, value=1} -> a 2x3 f32 tensor of ones.
struct FillConstant {
  static OpDef def() {
    OpDef d("fill_constant", "a tensor of `shape` and `dtype` filled with `value`");
    d.out("Out").required_attr<std::vector<int64_t>>("shape", "dims of Out (all >= 0)");
    return tensor_detail::fill_attrs(d);
  }
  static void infer_shape(InferShapeContext& c) {
    auto s = c.attr<std::vector<int64_t>>("shape");
    for (size_t i = 0; i < s.size(); ++i) c.check(s[i] >= 0, "shape [{}] has dim {} = {}; dims must be >= 0", fmt::join(s, ", "), i, s[i]);
    c.set_output("Out", Shape(s), DType(c.attr<int32_t>("dtype")));
  }
  static void eval_cpu(KernelContext&);  // kernels/cpu/fill_constant.hpp
};

/// out = value everywhere, with out.shape = shape except out.shape[output_dim_idx] = Input.shape[input_dim_idx].
/// Input [N, ...], {shape=[-1, 5]} -> Out [N, 5]. Never propagates a gradient.
struct FillConstantBatchSizeLike {
  static OpDef def() {
    OpDef d("fill_constant_batch_size_like", "like fill_constant, one dim copied from Input");
    d.in("Input").out("Out").required_attr<std::vector<int64_t>>("shape", "dims of Out; dim output_dim_idx is replaced");
    tensor_detail::fill_attrs(d);
    d.attr("input_dim_idx", 0).attr("output_dim_idx", 0);
    return d;
  }
  static void infer_shape(InferShapeContext& c) { c.set_output("Out", out_shape(c, c.shape("Input")), DType(c.attr<int32_t>("dtype"))); }
  /// The output shape for an input of shape `in` (dims may be -1); errors go through `c.fail`.
  template <class Ctx>
  static Shape out_shape(const Ctx& c, const Shape& in) {
    auto s = c.template attr<std::vector<int64_t>>("shape");
    int ii = c.template attr<int32_t>("input_dim_idx"), oi = c.template attr<int32_t>("output_dim_idx");
    c.check(ii >= 0 && ii < in.rank(), "input_dim_idx = {} is out of range for Input {}", ii, in.str());
    c.check(oi >= 0 && oi < int(s.size()), "output_dim_idx = {} is out of range for shape [{}]", oi, fmt::join(s, ", "));
    s[size_t(oi)] = in[ii];
    for (size_t i = 0; i < s.size(); ++i)
      c.check(s[i] >= 0 || int(i) == oi, "shape [{}] has dim {} = {}; dims other than output_dim_idx must be >= 0", fmt::join(s, ", "), i, s[i]);
    return Shape(s);
  }
  static void eval_cpu(KernelContext&);  // kernels/cpu/fill_constant.hpp
};

}  // namespace oar::ops
