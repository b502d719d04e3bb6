// oar/ops/runtime_shape.hpp: sizes known only when the program runs, as tensors: shape (a tensor's dims) and
// range (an arithmetic sequence whose bounds are tensors). An imported ONNX model that builds a mask from its
// padded input's length needs both. Kernels in kernels/cpu/runtime_shape.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// Out = Input's dims as int32 [rank] (Fluid's shape op). Input's values are not read. No gradient.
struct ShapeOf {
  static constexpr std::string_view type = "shape";
  static constexpr Slot input{"Input"}, out{"Out"};
  static OpDef def() { return OpDef(type, "Out = the dims of Input, as int32").in(input).out(out); }
  static void infer_shape(InferShapeContext& c) { c.set_output(out, Shape{c.shape(input).rank()}, DType::i32, 0); }
  static void eval_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/runtime_shape.hpp
  static constexpr bool any_place = true;  // writes dims the host knows
};

/// Out = [Start, Start + Step, ...) up to End (excluded): max(0, ceil((End - Start) / Step)) values, so a
/// Step that points away from End gives an empty Out (ONNX's Range; Fluid's range refuses it). Start, End,
/// Step: one value each, of one dtype (i32, i64, f32, f64) -> Out [n] of that dtype. Step != 0. No gradient.
struct Range {
  static constexpr std::string_view type = "range";
  static constexpr Slot start{"Start"}, end{"End"}, step{"Step"}, out{"Out"};
  static OpDef def() { return OpDef(type, "Out = Start, Start + Step, ... while before End").in(start).in(end).in(step).out(out); }
  static void infer_shape(InferShapeContext& c) {
    const DType dt = c.dtype(start);
    c.check(dt == DType::i32 || dt == DType::i64 || dt == DType::f32 || dt == DType::f64, "Start must be i32, i64, f32 or f64, got {}", name(dt));
    for (const Slot* s : {&start, &end, &step}) {
      c.check(c.dtype(*s) == dt, "{} is {}, but Start is {}: the three must share a dtype", s->name, name(c.dtype(*s)), name(dt));
      c.check(c.shape(*s).numel() == 1 || !c.shape(*s).known(), "{} must hold one value, got {}", s->name, c.shape(*s).str());
    }
    c.set_output(out, Shape{-1}, dt, 0);
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/runtime_shape.hpp
  static constexpr bool any_place = true;  // reads three values on the host, stores the sequence
};

}  // namespace oar::ops
