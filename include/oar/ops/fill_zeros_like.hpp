// oar/ops/fill_zeros_like.hpp: fill_zeros_like, zeros of X's shape and dtype (autodiff's gradient of an
// output nobody differentiated).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = 0
/// x: any shape and dtype -> the same shape and dtype. X's values are not read. A tensor array X gives an array
/// of as many entries, each zeros shaped like X's (empty where X's is empty).
struct FillZerosLike {
  static constexpr std::string_view type = "fill_zeros_like";
  static constexpr Slot x{"X"}, out{"Out"};
  static OpDef def() { return OpDef(type, "zeros shaped like X").in(x).out(out); }
  static void infer_shape(InferShapeContext& c) {
    c.set_output(out, c.shape(x), c.dtype(x));
    if (c.input_var(x).kind() == VarKind::lod_tensor_array) c.output_var(out).set_kind(VarKind::lod_tensor_array).set_lod_level(c.lod_level(x));
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/fill_zeros_like.hpp
  static constexpr bool any_place = true;  // its kernel serves CUDA too (zeros queued on the place's stream)
};

}  // namespace oar::ops
