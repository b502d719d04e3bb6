// oar/ops/sequence_expand.hpp: sequence_expand, Fluid's repeat of X's rows (or X's sequences) as many times
// as Y's sequences at one LoD level say. Kernels in kernels/cpu/sequence_expand.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// With r = Y's LoD at ref_level (-1: the last level) and n_i = r[i+1] - r[i]: Out is unit 0 of X repeated
/// n_0 times, then unit 1 repeated n_1 times, ...; a unit is X's sequence i when X has LoD (one level at most),
/// else X's row i. X must have as many units as r has sequences.
/// LoD of Out: with X's LoD, one sequence per copy ([[0,2,3]] x with n = [2, 1] -> [[0,2,4,5]]); without it,
/// r itself (the copies of row i form sequence i).
/// X [M, ...], Y with LoD -> Out [sum of repeated rows, ...]. Y's values are not read and get no gradient.
/// Grad: sequence_expand_grad(X, Y, Out@GRAD) -> X@GRAD, each unit the sum of its copies' gradients.
struct SequenceExpand {
  static constexpr std::string_view type = "sequence_expand";
  static constexpr Slot x{"X"}, y{"Y"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<int32_t> ref_level{"ref_level"};

  struct Attrs {
    int32_t ref_level;
    explicit Attrs(const AttrReader& r) : ref_level(r(SequenceExpand::ref_level)) {}
  };

  static OpDef def() {
    return OpDef(type, "X's rows or sequences repeated as Y's LoD at ref_level says")
        .in(x).in(y).out(out)
        .attr(ref_level, -1, "the level of Y's LoD giving the repeat counts; -1 the last")
        .check<int32_t>([](int32_t v) { return v >= -1; }, "must be >= -1");
  }
  static void infer_shape(InferShapeContext& c) {
    const Shape& xs = c.shape(x);
    c.check(xs.rank() >= 1, "X must have rank >= 1 (rows first), got {}", xs.str());
    c.check(c.lod_level(x) <= 1, "X has {} LoD levels; sequence_expand takes X with at most 1", c.lod_level(x));
    const int ly = c.lod_level(y), ref = c.attr(ref_level);
    c.check(ref < ly || ly == 0, "ref_level = {} but Y has only {} LoD levels", ref, ly);
    Shape os = xs;
    os[0] = -1;
    c.set_output(out, os, c.dtype(x), 1);
  }
  /// sequence_expand_grad(X, Y, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(x)) return {};
    return {g.grad_op({.inputs = {x, y}, .output_grads = {out}, .input_grads = {x}})};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/sequence_expand.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/sequence_expand.hpp
  static void eval_cuda(KernelContext&, const Attrs&);       // kernels/cuda/sequence.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/sequence.hpp
};

}  // namespace oar::ops
