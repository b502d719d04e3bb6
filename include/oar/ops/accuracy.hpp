// oar/ops/accuracy.hpp: top-k accuracy of a batch: a row is correct when its label is among its k indices
// (Indices come from top_k). No gradient. Kernel in kernels/cpu/accuracy.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// correct = #{i : label_i in indices[i, 0..k)}, total = N, accuracy = correct / total (0 for an empty batch)
/// out: [N, k] (top-k values, only its shape is read), indices: i64 [N, k], label: i64 [N, 1]
/// -> accuracy f32 [1], correct i32 [1], total i32 [1] (Fluid's dtypes).
struct Accuracy {
  static constexpr std::string_view type = "accuracy";
  static constexpr Slot out{"Out"}, indices{"Indices"}, label{"Label"}, accuracy{"Accuracy"}, correct{"Correct"}, total{"Total"};

  static OpDef def() {
    return OpDef(type, "fraction of rows whose label is among the top-k indices")
        .in(out).in(indices).in(label).out(accuracy).out(correct).out(total);
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& o = c.shape(out);
    const Shape& ind = c.shape(indices);
    const Shape& l = c.shape(label);
    c.check(ind.rank() == 2, "Indices must be [N, k], got {}", ind.str());
    c.check(o.rank() == 2 && dims_compatible(o[0], ind[0]) && dims_compatible(o[1], ind[1]), "Out {} must have the shape of Indices {}", o.str(), ind.str());
    c.check(c.dtype(indices) == DType::i64 || c.dtype(indices) == DType::i32, "Indices must be i64 (or i32), got {}", name(c.dtype(indices)));
    c.check(c.dtype(label) == DType::i64 || c.dtype(label) == DType::i32, "Label must be i64 (or i32), got {}", name(c.dtype(label)));
    c.check(l.rank() == 2 && dims_compatible(l[1], 1), "Label must be [N, 1], got {}", l.str());
    c.check(dims_compatible(l[0], ind[0]), "Label {} and Indices {} have different batch sizes", l.str(), ind.str());
    c.set_output(accuracy, Shape{1}, DType::f32);
    c.set_output(correct, Shape{1}, DType::i32);
    c.set_output(total, Shape{1}, DType::i32);
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/accuracy.hpp
  static void eval_cuda(KernelContext&, const NoAttrs&);  // kernels/cuda/nn.hpp
};

}  // namespace oar::ops
