// oar/ops/tensor_array.hpp: the tensor-array ops Fluid's While loops are written with: write_to_array and
// read_from_array (with their gradients) and lod_array_length. A tensor array is a variable of kind
// lod_tensor_array, a list of LoDTensors at run time; its compile-time shape and dtype are those of its entries.
// Kernels in kernels/cpu/tensor_array.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

namespace array_detail {
/// The checks every op taking an index I makes: one i64 (or i32) element.
inline void check_index(InferShapeContext& c, Slot i) {
  const DType t = c.dtype(i);
  c.check(t == DType::i64 || t == DType::i32, "I ('{}') is an index and must be i64 (or i32), got {}", c.op().input(i)[0], name(t));
  const Shape& s = c.shape(i);
  c.check(s.numel() < 0 || s.numel() == 1, "I ('{}') must hold exactly one element, got {}", c.op().input(i)[0], s.str());
}
/// Input `slot` must be a tensor array.
inline void check_array(InferShapeContext& c, Slot slot) {
  const Variable& v = c.input_var(slot);
  c.check(v.kind() == VarKind::lod_tensor_array, "{} ('{}') must be a tensor array (oar::create_array), it is a plain variable", slot.name, v.name());
}
/// `s` with its first dim made unknown (the rows of a step differ from step to step).
inline Shape rows_unknown(Shape s) {
  if (s.rank() > 0) s[0] = -1;
  return s;
}
}  // namespace array_detail

/// out[i] = a copy of x (with its LoD); the array grows to i + 1 entries when shorter (new entries empty). Out
/// is written in place: it is the array written before, if any (Fluid's array_write). Any dtype.
/// X [d...], I i64 [1] -> Out: array of X's dtype, entries [d...]. Grad: write_to_array_grad(X, I, Out@GRAD) ->
/// X@GRAD = Out@GRAD[i], or zeros shaped like X when Out@GRAD has no (or an empty) entry i.
struct WriteToArray {
  static constexpr std::string_view type = "write_to_array";
  static constexpr Slot x{"X"}, i{"I"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static OpDef def() { return OpDef(type, "Out[I] = a copy of X, growing the array Out as needed").in(x).in(i).out(out); }
  static void infer_shape(InferShapeContext& c) {
    array_detail::check_index(c, i);
    Variable& o = c.output_var(out);
    const Shape& xs = c.shape(x);
    if (o.kind() == VarKind::lod_tensor_array) {  // declared (create_array) or written before: entries must agree
      c.check(o.dtype() == c.dtype(x), "X is {} but the array '{}' holds {}", name(c.dtype(x)), o.name(), name(o.dtype()));
      Shape s = o.shape();
      if (s.rank() == xs.rank()) {  // entries of differing rows (steps): those dims become unknown
        for (int d = 0; d < s.rank(); ++d)
          if (s[d] != xs[d]) s[d] = -1;
      } else {
        s = xs;
      }
      o.set_shape(s);
    } else {
      o.set_kind(VarKind::lod_tensor_array).set_shape(xs).set_dtype(c.dtype(x));
    }
    o.set_lod_level(c.lod_level(x));
  }
  /// write_to_array_grad(X, I, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(x)) return {};
    return {g.grad_op({.inputs = {x, i}, .output_grads = {out}, .input_grads = {x}}, GradContext::without_attrs)};
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);       // kernels/cpu/tensor_array.hpp
  static void eval_grad_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/tensor_array.hpp
  static constexpr bool any_place = true;  // its kernels serve CUDA too (rows copied on the place)
};

/// out = a copy of x[i] (with its LoD); an oar::Error when i is out of range or the entry was never written.
/// X: array, entries [d...], I i64 [1] -> Out [d...]. Grad: read_from_array_grad(X, I, Out@GRAD) -> X@GRAD, an
/// array as long as X whose entry i is Out@GRAD and whose other entries are empty (autodiff sums such arrays).
struct ReadFromArray {
  static constexpr std::string_view type = "read_from_array";
  static constexpr Slot x{"X"}, i{"I"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static OpDef def() { return OpDef(type, "Out = a copy of entry I of the array X").in(x).in(i).out(out); }
  static void infer_shape(InferShapeContext& c) {
    array_detail::check_array(c, x);
    array_detail::check_index(c, i);
    c.set_output(out, c.shape(x), c.dtype(x), c.lod_level(x));
  }
  /// read_from_array_grad(X, I, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(x)) return {};
    return {g.grad_op({.inputs = {x, i}, .output_grads = {out}, .input_grads = {x}}, GradContext::without_attrs)};
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);       // kernels/cpu/tensor_array.hpp
  static void eval_grad_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/tensor_array.hpp
  static constexpr bool any_place = true;  // its kernels serve CUDA too (rows copied on the place)
};

/// out = the number of entries of the array x. X: array -> Out i64 [1]. No gradient.
struct LoDArrayLength {
  static constexpr std::string_view type = "lod_array_length";
  static constexpr Slot x{"X"}, out{"Out"};
  static OpDef def() { return OpDef(type, "Out = the number of entries of the array X").in(x).out(out); }
  static void infer_shape(InferShapeContext& c) {
    array_detail::check_array(c, x);
    c.set_output(out, Shape{1}, DType::i64, 0);
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/tensor_array.hpp
  static constexpr bool any_place = true;  // its kernels serve CUDA too (rows copied on the place)
};

}  // namespace oar::ops
