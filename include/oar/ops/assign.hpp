// oar/ops/assign.hpp: the copying ops: assign (Out = a copy of X, tensor or SelectedRows), cast (Out = X in
// another dtype) and increment (Out = X + step for a one-element counter).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = x (a copy with its own storage, so later in-place writes to either side stay apart).
/// X [any] -> Out [same], any dtype; LoD copied. Grad: X@GRAD = assign(Out@GRAD).
struct Assign {
  static constexpr std::string_view type = "assign";
  /// Its kernels make views or copy through the place: they serve every place (runtime/kernel_registry.hpp).
  static constexpr bool any_place = true;
  static constexpr Slot x{"X"}, out{"Out"};
  static OpDef def() { return OpDef(type, "Out = a copy of X").in(x).out(out); }
  static void infer_shape(InferShapeContext& c) {
    c.set_output(out, c.shape(x), c.dtype(x));
    c.share_lod(x, out);
    if (c.input_var(x).kind() == VarKind::selected_rows) c.output_var(out).set_kind(VarKind::selected_rows);
  }
  static std::vector<Operator> grad(const GradContext& g) {
    auto dx = g.input_grad(x);
    if (!g.wants_grad(x)) return {};
    Operator op = g.new_op(type);
    op.set_input(x, g.output_grad(out)).set_output(out, dx);
    return {op};
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/assign.hpp
};

/// out = x + step, for X of one element (a loop counter); any numeric dtype. In-place allowed (Out == X).
/// X [1] -> Out [1]. No gradient (Fluid's is a counter, not a differentiable op).
struct Increment {
  static constexpr std::string_view type = "increment";
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Attr<float> step{"step"};
  struct Attrs {
    float step;
    explicit Attrs(const AttrReader& r) : step(r(Increment::step)) {}
  };
  static OpDef def() { return OpDef(type, "Out = X + step for a one-element X").in(x).out(out).attr(step, 1.0f); }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    c.check(xs.numel() < 0 || xs.numel() == 1, "X must hold exactly one element, X is {}", xs.str());
    c.check(c.dtype(x) != DType::boolean, "X must be numeric, got bool");
    c.set_output(out, xs, c.dtype(x));
  }
  static void eval_cpu(KernelContext&, const Attrs&);   // kernels/cpu/assign.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/elementwise.hpp
};

/// out = static_cast<out_dtype>(x). X [any] of in_dtype -> Out [same] of out_dtype (bool, i32, i64, f32, f64;
/// float -> int truncates toward zero, anything -> bool is x != 0). Grad (float -> float only): cast back.
struct Cast {
  static constexpr std::string_view type = "cast";
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Attr<int32_t> in_dtype{"in_dtype"}, out_dtype{"out_dtype"};
  /// The dtypes as DType (their values are checked by the schema).
  struct Attrs {
    DType in_dtype, out_dtype;
    explicit Attrs(const AttrReader& r) : in_dtype(DType(r(Cast::in_dtype))), out_dtype(DType(r(Cast::out_dtype))) {}
  };
  static OpDef def() {
    auto ok = [](int32_t v) { return v == 0 || v == 2 || v == 3 || v == 4 || v == 5 || v == 6 || v == 22; };
    return OpDef(type, "Out = X converted to out_dtype")
        .in(x).out(out)
        .required_attr(in_dtype).check<int32_t>(ok, "must be one of 0 (bool), 2 (i32), 3 (i64), 4 (f16), 5 (f32), 6 (f64), 22 (bf16)")
        .required_attr(out_dtype).check<int32_t>(ok, "must be one of 0 (bool), 2 (i32), 3 (i64), 4 (f16), 5 (f32), 6 (f64), 22 (bf16)");
  }
  static void infer_shape(InferShapeContext& c) {
    DType in = DType(c.attr(in_dtype));
    c.check(c.dtype(x) == in, "X is {} but in_dtype is {} ({})", name(c.dtype(x)), int(in), name(in));
    c.set_output(out, c.shape(x), DType(c.attr(out_dtype)));
    c.share_lod(x, out);
  }
  /// cast(Out@GRAD, in_dtype = out_dtype, out_dtype = in_dtype) -> X@GRAD, when both dtypes are floating.
  static std::vector<Operator> grad(const GradContext& g) {
    auto dx = g.input_grad(x);
    int32_t from = g.fwd().attr(in_dtype), to = g.fwd().attr(out_dtype);
    if (!g.wants_grad(x) || !is_float(DType(from)) || !is_float(DType(to))) return {};
    Operator op = g.new_op(type);
    op.set_input(x, g.output_grad(out)).set_output(out, dx).set_attr(in_dtype, to).set_attr(out_dtype, from);
    return {op};
  }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/assign.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/tensor.hpp
};

}  // namespace oar::ops
