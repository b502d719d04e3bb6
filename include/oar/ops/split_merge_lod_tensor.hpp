// oar/ops/split_merge_lod_tensor.hpp: split_lod_tensor and merge_lod_tensor, the pair under IfElse: the rows (or
// sequences) of a batch parted by a per-item bool mask, and put back together in their first order. Kernels in
// kernels/cpu/split_merge_lod_tensor.hpp.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// What both ops check of the mask and the level at build time. An item is a row of X when X has no LoD, else a
/// sequence of X's LoD level `level` (with all the levels and rows below it).
inline void check_lod_mask(InferShapeContext& c, Slot x, Slot mask, int32_t level) {
  c.check(c.dtype(mask) == DType::boolean, "Mask ('{}') must be bool, got {}", c.op().input(mask)[0], name(c.dtype(mask)));
  const Shape& ms = c.shape(mask);
  c.check(ms.rank() == 1 || (ms.rank() == 2 && (ms[1] == 1 || ms[1] < 0)), "Mask ('{}') must be [N] or [N, 1] (one entry per item), got {}",
          c.op().input(mask)[0], ms.str());
  c.check(c.shape(x).rank() >= 1, "X ('{}') must have rows (rank >= 1), got {}", c.op().input(x)[0], c.shape(x).str());
  c.check(level >= 0, "level must be >= 0, got {}", level);
  const int lx = c.lod_level(x);
  c.check(lx == 0 || level < lx, "level {} is not a LoD level of X ('{}'), which has {}", level, c.op().input(x)[0], lx);
}

/// OutTrue = the items of X whose Mask entry is true, OutFalse = the others, each in X's order. An item is a row
/// (X without LoD) or a sequence of LoD level `level` (taken whole, its lower levels rebased; the levels above
/// `level` are dropped). Any dtype: the rows are moved, not computed on.
/// X [N, ...] (rows or LoD), Mask bool [items] or [items, 1] -> OutTrue [T, ...], OutFalse [F, ...].
/// Grad: merge_lod_tensor(OutTrue@GRAD, OutFalse@GRAD, X, Mask) -> X@GRAD (a missing one is zeros); Mask none.
///   Mask {1, 0, 1}, X rows {a, b, c} -> OutTrue {a, c}, OutFalse {b}.
struct SplitLoDTensor {
  static constexpr std::string_view type = "split_lod_tensor";
  static constexpr Slot x{"X"}, mask{"Mask"}, out_true{"OutTrue"}, out_false{"OutFalse"};
  static constexpr Slot x_grad{"X@GRAD"}, out_true_grad{"OutTrue@GRAD"}, out_false_grad{"OutFalse@GRAD"};
  static constexpr Attr<int32_t> level{"level"};

  struct Attrs {
    int32_t level;
    explicit Attrs(const AttrReader& r) : level(r(SplitLoDTensor::level)) {}
  };

  static OpDef def() {
    return OpDef(type, "the items (rows or sequences) of X where Mask is true, and where it is false")
        .in(x).in(mask, none, "bool, one entry per item of X")
        .out(out_true).out(out_false)
        .attr(level, 0, "the LoD level whose sequences are the items (X with LoD)");
  }
  static void infer_shape(InferShapeContext& c) {
    check_lod_mask(c, x, mask, c.attr(level));
    Shape s = c.shape(x);
    s[0] = -1;
    const int lx = c.lod_level(x);
    const int lo = lx > 0 ? lx - c.attr(level) : 0;
    c.set_output(out_true, s, c.dtype(x), lo);
    c.set_output(out_false, s, c.dtype(x), lo);
  }
  /// merge_lod_tensor(InTrue = OutTrue@GRAD, InFalse = OutFalse@GRAD, X, Mask) -> Out = X@GRAD
  static std::vector<Operator> grad(const GradContext& g);  // defined below MergeLoDTensor
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/split_merge_lod_tensor.hpp
  static constexpr bool any_place = true;               // its kernel serves CUDA too (copies on the place's stream)
};

/// Out item i = the next item of InTrue when Mask[i], else the next item of InFalse: the inverse of
/// split_lod_tensor. X gives the items' rows (its row count, or its LoD, which Out takes); each branch keeps its
/// items' rows. When no row is taken from InTrue (InFalse), it is not read at all: it may hold stale data of
/// any shape (a branch that did not run keeps its old values). Any dtype.
/// InTrue [T, ...], InFalse [F, ...], X [N, ...] (rows or LoD), Mask bool [items] or [items, 1] -> Out [N, ...]
/// with X's LoD. Grad: merge_lod_tensor_grad(X, Mask, Out@GRAD) -> InTrue@GRAD, InFalse@GRAD: Out@GRAD split
/// by the mask (zeros shaped like an input that was not read); X and Mask get none.
struct MergeLoDTensor {
  static constexpr std::string_view type = "merge_lod_tensor";
  static constexpr Slot in_true{"InTrue"}, in_false{"InFalse"}, x{"X"}, mask{"Mask"}, out{"Out"};
  static constexpr Slot in_true_grad{"InTrue@GRAD"}, in_false_grad{"InFalse@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<int32_t> level = SplitLoDTensor::level;

  using Attrs = SplitLoDTensor::Attrs;

  static OpDef def() {
    return OpDef(type, "the items of InTrue and InFalse back in X's order, by Mask")
        .in(in_true, none, "the items where Mask is true (not read when there are none)")
        .in(in_false, none, "the items where Mask is false (not read when there are none)")
        .in(x, none, "gives the items' rows: its row count, or its LoD")
        .in(mask, none, "bool, one entry per item of X")
        .out(out)
        .attr(level, 0, "the LoD level whose sequences are the items (X with LoD)");
  }
  static void infer_shape(InferShapeContext& c) {
    check_lod_mask(c, x, mask, c.attr(level));
    const Shape& ts = c.shape(in_true);
    const Shape& fs = c.shape(in_false);
    c.check(c.dtype(in_true) == c.dtype(in_false), "InTrue ('{}') is {} but InFalse ('{}') is {}", c.op().input(in_true)[0], name(c.dtype(in_true)),
            c.op().input(in_false)[0], name(c.dtype(in_false)));
    c.check(ts.rank() >= 1 && ts.rank() == fs.rank(), "InTrue ('{}') {} and InFalse ('{}') {} must have rows and one rank", c.op().input(in_true)[0],
            ts.str(), c.op().input(in_false)[0], fs.str());
    Shape s = ts;
    for (int d = 1; d < s.rank(); ++d) {
      c.check(ts[d] < 0 || fs[d] < 0 || ts[d] == fs[d], "InTrue ('{}') {} and InFalse ('{}') {} differ past the rows", c.op().input(in_true)[0], ts.str(),
              c.op().input(in_false)[0], fs.str());
      if (s[d] < 0) s[d] = fs[d];
    }
    s[0] = c.shape(x)[0];
    c.set_output(out, s, c.dtype(in_true), c.lod_level(x));
  }
  /// merge_lod_tensor_grad(X, Mask, Out@GRAD) -> InTrue@GRAD, InFalse@GRAD. InTrue and InFalse come along for
  /// the shapes of the zeros of one not read.
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(in_true) && !g.wants_grad(in_false)) return {};
    Operator op = g.grad_op();
    op.set_input(in_true, g.input(in_true)).set_input(in_false, g.input(in_false)).set_input(x, g.input(x)).set_input(mask, g.input(mask));
    op.set_input(out_grad, g.output_grad(out));
    op.set_output(in_true_grad, g.input_grad(in_true)).set_output(in_false_grad, g.input_grad(in_false));
    return {op};
  }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/split_merge_lod_tensor.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/split_merge_lod_tensor.hpp
  static constexpr bool any_place = true;                    // its kernels serve CUDA too
};

inline std::vector<Operator> SplitLoDTensor::grad(const GradContext& g) {
  if (!g.wants_grad(x)) return {};
  using M = MergeLoDTensor;
  Operator op = g.new_op(M::type, GradContext::with_attrs);
  op.set_input(M::in_true, g.output_grad(out_true)).set_input(M::in_false, g.output_grad(out_false));
  op.set_input(M::x, g.input(x)).set_input(M::mask, g.input(mask)).set_output(M::out, g.input_grad(x));
  return {op};
}

}  // namespace oar::ops
