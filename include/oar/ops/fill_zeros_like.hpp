// oar/ops/fill_zeros_like.hpp: fill_zeros_like, zeros of X's shape and dtype (autodiff's gradient of an
// output nobody differentiated).
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// out = 0
/// x: any shape and dtype -> the same shape and dtype. X's values are not read.
struct FillZerosLike {
  static OpDef def() { return OpDef("fill_zeros_like", "zeros shaped like X").in("X").out("Out"); }
  static void infer_shape(InferShapeContext& c) { c.set_output("Out", c.shape("X"), c.dtype("X")); }
  static void eval_cpu(KernelContext&);  // kernels/cpu/fill_zeros_like.hpp
};

}  // namespace oar::ops
