// oar/ops/fill_constant.hpp: fill_constant (a tensor of `shape` filled with `value`) and
// fill_constant_batch_size_like (the same, with one dim taken from an input's batch).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

namespace tensor_detail {
/// Checks a `dtype` attribute given as Fluid's VarType number.
inline bool valid_dtype_attr(int32_t v) { return is_valid_dtype(v); }

/// The names and decoded attributes both fill ops share.
struct FillNames {
  static constexpr Slot out{"Out"};
  static constexpr Attr<std::vector<int64_t>> shape{"shape"};
  static constexpr Attr<int32_t> dtype{"dtype"};
  static constexpr Attr<float> value{"value"};
  static constexpr Attr<bool> force_cpu{"force_cpu"};
};

inline OpDef& fill_attrs(OpDef& d) {
  return d.attr(FillNames::dtype, int32_t(DType::f32), "element type as Fluid's VarType number (5 = f32)")
      .check<int32_t>(valid_dtype_attr, "is not a dtype (0 bool, 2 i32, 3 i64, 5 f32, 6 f64, ...)")
      .attr(FillNames::value, 0.0f, "the fill value")
      .attr(FillNames::force_cpu, false, "Fluid compatibility; ignored");
}

/// `shape` as a Shape (dims inline: no heap), `dtype`, `value`.
struct FillAttrs {
  Shape shape;
  DType dtype;
  float value;
  explicit FillAttrs(const AttrReader& r)
      : shape(Shape(r(FillNames::shape))), dtype(DType(r(FillNames::dtype))), value(r(FillNames::value)) {}
};
}  // namespace tensor_detail

/// out = value everywhere.  {shape: [d...], dtype} -> Out [d...] of dtype.
/// Example: fill_constant {shape=[2,3], dtype=5, value=1} -> a 2x3 f32 tensor of ones.
struct FillConstant : tensor_detail::FillNames {
  static constexpr std::string_view type = "fill_constant";
  using Attrs = tensor_detail::FillAttrs;
  static OpDef def() {
    OpDef d(type, "a tensor of `shape` and `dtype` filled with `value`");
    d.out(out).required_attr(shape, "dims of Out (all >= 0)");
    return tensor_detail::fill_attrs(d);
  }
  static void infer_shape(InferShapeContext& c) {
    auto s = c.attr(shape);
    for (size_t i = 0; i < s.size(); ++i) c.check(s[i] >= 0, "shape [{}] has dim {} = {}; dims must be >= 0", fmt::join(s, ", "), i, s[i]);
    c.set_output(out, Shape(s), DType(c.attr(dtype)));
  }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/fill_constant.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/elementwise.hpp
};

/// out = value everywhere, with out.shape = shape except out.shape[output_dim_idx] = Input.shape[input_dim_idx].
/// Input [N, ...], {shape=[-1, 5]} -> Out [N, 5]. Never propagates a gradient.
struct FillConstantBatchSizeLike : tensor_detail::FillNames {
  static constexpr std::string_view type = "fill_constant_batch_size_like";
  static constexpr Slot input{"Input"};
  static constexpr Attr<int32_t> input_dim_idx{"input_dim_idx"}, output_dim_idx{"output_dim_idx"};
  struct Attrs : tensor_detail::FillAttrs {
    int32_t input_dim_idx, output_dim_idx;
    explicit Attrs(const AttrReader& r)
        : FillAttrs(r), input_dim_idx(r(FillConstantBatchSizeLike::input_dim_idx)), output_dim_idx(r(FillConstantBatchSizeLike::output_dim_idx)) {}
  };
  static OpDef def() {
    OpDef d(type, "like fill_constant, one dim copied from Input");
    d.in(input).out(out).required_attr(shape, "dims of Out; dim output_dim_idx is replaced");
    tensor_detail::fill_attrs(d);
    d.attr(input_dim_idx, 0).attr(output_dim_idx, 0);
    return d;
  }
  static void infer_shape(InferShapeContext& c) {
    c.set_output(out, out_shape(c, Shape(c.attr(shape)), c.attr(input_dim_idx), c.attr(output_dim_idx), c.shape(input)), DType(c.attr(dtype)));
  }
  /// The output shape for an input of shape `in` (dims may be -1); errors go through `c.fail`.
  template <class Ctx>
  static Shape out_shape(const Ctx& c, Shape s, int ii, int oi, const Shape& in) {
    c.check(ii >= 0 && ii < in.rank(), "input_dim_idx = {} is out of range for Input {}", ii, in.str());
    c.check(oi >= 0 && oi < s.rank(), "output_dim_idx = {} is out of range for shape {}", oi, s.str());
    s[oi] = in[ii];
    for (int i = 0; i < s.rank(); ++i)
      c.check(s[i] >= 0 || i == oi, "shape {} has dim {} = {}; dims other than output_dim_idx must be >= 0", s.str(), i, s[i]);
    return s;
  }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/fill_constant.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/elementwise.hpp
};

}  // namespace oar::ops
