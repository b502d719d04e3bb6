// oar/ops/sequence_conv.hpp: sequence_conv, a 1-D convolution along the rows of each sequence of a LoD
// tensor (Fluid's context projection followed by a product with the filter). Kernels in kernels/cpu/sequence_conv.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out[r] = concat(x[r + start], ..., x[r + start + length - 1]) * filter, where rows outside r's own sequence
/// are zeros (each sequence is padded on its own, never reading a neighbour).
/// x: [N, D] with one LoD level, filter: [length * D, M] -> out: [N, M] with x's LoD.
/// contextStride must be 1 and paddingTrainable false (trainable padding, Fluid's PaddingData, is not
/// implemented: the slot is accepted and ignored). Grads: X@GRAD and Filter@GRAD.
struct SequenceConv {
  static constexpr std::string_view type = "sequence_conv";
  static constexpr Slot x{"X"}, filter{"Filter"}, padding_data{"PaddingData"}, out{"Out"};
  static constexpr Slot x_grad{"X@GRAD"}, filter_grad{"Filter@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<int32_t> context_length{"contextLength"}, context_start{"contextStart"}, context_stride{"contextStride"};
  static constexpr Attr<bool> padding_trainable{"paddingTrainable"};

  /// What the kernels read, decoded once when a program is prepared.
  struct Attrs {
    int32_t length, start;
    explicit Attrs(const AttrReader& r) : length(r(SequenceConv::context_length)), start(r(SequenceConv::context_start)) {}
  };

  static OpDef def() {
    return OpDef(type, "convolution along the rows of each sequence (zeros outside the sequence)")
        .in(x).in(filter).in(padding_data, dispensable, "Fluid's trainable padding rows; not implemented, ignored").out(out)
        .required_attr(context_length, "rows in a window (the filter size)").check<int32_t>([](int32_t v) { return v >= 1; }, "must be >= 1")
        .attr(context_start, 0, "offset of a window's first row from the output row (negative: rows before it)")
        .attr(context_stride, 1, "step between windows").check<int32_t>([](int32_t v) { return v == 1; }, "must be 1 (the only stride sequence_conv has)")
        .attr(padding_trainable, false, "learned padding rows instead of zeros")
        .check<bool>([](bool v) { return !v; }, "true is not implemented (trainable padding); only zero padding is");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    const Shape& fs = c.shape(filter);
    const int32_t len = c.attr(context_length);
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    c.check(c.dtype(filter) == c.dtype(x), "Filter must have X's dtype {}, got {}", name(c.dtype(x)), name(c.dtype(filter)));
    c.check(xs.rank() == 2, "X must be [N, D], got {}", xs.str());
    c.check(fs.rank() == 2, "Filter must be [contextLength * D, M], got {}", fs.str());
    c.check(fs[0] < 0 || xs[1] < 0 || fs[0] == int64_t(len) * xs[1], "Filter has {} rows, but contextLength * D = {} * {} = {}", fs[0], len, xs[1],
            int64_t(len) * xs[1]);
    c.set_output(out, Shape{xs[0], fs[1]}, c.dtype(x));
    c.share_lod(x, out);
  }
  /// sequence_conv_grad(X, Filter, Out@GRAD) -> X@GRAD, Filter@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    auto dx = g.input_grad(x), df = g.input_grad(filter);
    if (!g.wants_grad(x) && !g.wants_grad(filter)) return {};
    Operator op = g.grad_op();
    op.set_input(x, g.input(x)).set_input(filter, g.input(filter)).set_input(out_grad, g.output_grad(out));
    op.set_output(x_grad, dx).set_output(filter_grad, df);
    return {op};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/sequence_conv.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/sequence_conv.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/sequence_conv.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/sequence_conv.hpp
};

}  // namespace oar::ops
