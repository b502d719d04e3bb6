// oar/ops/sequence_mask.hpp: sequence_mask, the 0/1 mask of a batch of sequence lengths. Kernels in
// kernels/cpu/sequence_mask.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// y[..., j] = (j < x[...]) for j in [0, maxlen); maxlen < 0: the largest length in X (0 for an empty X).
/// X i64 or i32 lengths (>= 0) [d...] -> Y [d..., maxlen] of out_dtype (Fluid's VarType number; i64 by
/// default), X's LoD level. No gradient.
struct SequenceMask {
  static constexpr std::string_view type = "sequence_mask";
  static constexpr Slot x{"X"}, y{"Y"};
  static constexpr Attr<int32_t> maxlen{"maxlen"}, out_dtype{"out_dtype"};

  struct Attrs {
    int32_t maxlen;
    DType out_dtype;
    explicit Attrs(const AttrReader& r) : maxlen(r(SequenceMask::maxlen)), out_dtype(DType(r(SequenceMask::out_dtype))) {}
  };

  static OpDef def() {
    return OpDef(type, "mask [d..., maxlen] of lengths [d...]: 1 where j < length")
        .in(x).out(y)
        .attr(maxlen, -1, "the mask's last dim; < 0: the largest length")
        .attr(out_dtype, int32_t(DType::i64), "Y's dtype as Fluid's VarType number (3 = i64)")
        .check<int32_t>([](int32_t v) { return is_valid_dtype(v) && DType(v) != DType::f16 && DType(v) != DType::bf16; },
                        "is not a dtype the mask is written in (0 bool, 2 i32, 3 i64, 5 f32, 6 f64, ...)");
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(c.dtype(x) == DType::i64 || c.dtype(x) == DType::i32, "X holds lengths and must be i64 or i32, got {}", name(c.dtype(x)));
    Shape ys = c.shape(x);
    const int32_t m = c.attr(maxlen);
    ys.insert(ys.rank(), m < 0 ? -1 : m);
    c.set_output(y, ys, DType(c.attr(out_dtype)));
    c.share_lod(x, y);
  }
  static void eval_cpu(KernelContext&, const Attrs&);   // kernels/cpu/sequence_mask.hpp
  static void eval_cuda(KernelContext&, const Attrs&);  // kernels/cuda/sequence_shape.hpp
};

}  // namespace oar::ops
