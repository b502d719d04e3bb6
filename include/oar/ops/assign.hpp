// oar/ops/assign.hpp: the copying ops: assign (Out = a copy of X, tensor or SelectedRows), cast (Out = X in
// another dtype) and increment (Out = X + step for a one-element counter).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = x (a copy with its own storage, so later in-place writes to either side stay apart).
/// X [any] -> Out [same], any dtype; LoD copied. Grad: X@GRAD = assign(Out@GRAD).
struct Assign {
  static OpDef def() { return OpDef("assign", "Out = a copy of X").in("X").out("Out"); }
  static void infer_shape(InferShapeContext& c) {
    c.set_output("Out", c.shape("X"), c.dtype("X"));
    c.share_lod("X", "Out");
    if (c.input_var("X").kind() == VarKind::selected_rows) c.output_var("Out").set_kind(VarKind::selected_rows);
  }
  static std::vector<Operator> grad(const GradContext& g) {
    auto dx = g.input_grad("X");
    if (dx[0] == kEmptyVarName) return {};
    Operator op("assign");
    op.set_input("X", g.output_grad("Out")).set_output("Out", dx);
    op.set_origin(g.fwd().origin());
    return {op};
  }
  static void eval_cpu(KernelContext&);  // kernels/cpu/assign.hpp
};

/// out = x + step, for X of one element (a loop counter); any numeric dtype. In-place allowed (Out == X).
/// X [1] -> Out [1]. No gradient (Fluid's is a counter, not a differentiable op).
struct Increment {
  static OpDef def() { return OpDef("increment", "Out = X + step for a one-element X").in("X").out("Out").attr("step", 1.0f); }
  static void infer_shape(InferShapeContext& c) {
    const Shape& x = c.shape("X");
    c.check(x.numel() < 0 || x.numel() == 1, "X must hold exactly one element, X is {}", x.str());
    c.check(c.dtype("X") != DType::boolean, "X must be numeric, got bool");
    c.set_output("Out", x, c.dtype("X"));
  }
  static void eval_cpu(KernelContext&);  // kernels/cpu/assign.hpp
};

/// out = static_cast<out_dtype>(x). X [any] of in_dtype -> Out [same] of out_dtype (bool, i32, i64, f32, f64;
/// float -> int truncates toward zero, anything -> bool is x != 0). Grad (float -> float only): cast back.
struct Cast {
  static OpDef def() {
    auto ok = [](int32_t v) { return v == 0 || v == 2 || v == 3 || v == 5 || v == 6; };
    return OpDef("cast", "Out = X converted to out_dtype")
        .in("X").out("Out")
        .required_attr<int32_t>("in_dtype").check<int32_t>(ok, "must be one of 0 (bool), 2 (i32), 3 (i64), 5 (f32), 6 (f64)")
        .required_attr<int32_t>("out_dtype").check<int32_t>(ok, "must be one of 0 (bool), 2 (i32), 3 (i64), 5 (f32), 6 (f64)");
  }
  static void infer_shape(InferShapeContext& c) {
    DType in = DType(c.attr<int32_t>("in_dtype"));
    c.check(c.dtype("X") == in, "X is {} but in_dtype is {} ({})", name(c.dtype("X")), int(in), name(in));
    c.set_output("Out", c.shape("X"), DType(c.attr<int32_t>("out_dtype")));
    c.share_lod("X", "Out");
  }
  /// cast(Out@GRAD, in_dtype = out_dtype, out_dtype = in_dtype) -> X@GRAD, when both dtypes are floating.
  static std::vector<Operator> grad(const GradContext& g) {
    auto dx = g.input_grad("X");
    int32_t in = g.fwd().attr<int32_t>("in_dtype"), out = g.fwd().attr<int32_t>("out_dtype");
    if (dx[0] == kEmptyVarName || !is_float(DType(in)) || !is_float(DType(out))) return {};
    Operator op("cast");
    op.set_input("X", g.output_grad("Out")).set_output("Out", dx).set_attr("in_dtype", out).set_attr("out_dtype", in);
    op.set_origin(g.fwd().origin());
    return {op};
  }
  static void eval_cpu(KernelContext&);  // kernels/cpu/assign.hpp
};

}  // namespace oar::ops
