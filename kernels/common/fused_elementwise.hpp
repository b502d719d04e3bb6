// kernels/common/fused_elementwise.hpp: what fused_elementwise's kernels on every place start from: the inputs
// checked and mapped onto their broadcast shape, and the gradient targets; with the per-thread arrays they are
// kept in.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "oar/ops/fused_elementwise.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels::fused {

inline constexpr int kMaxRank = Shape::kMaxRank;  ///< a broadcast has at most the output's dims

/// How one input is read along the flat output: the same layout, one value, or through broadcast strides.
/// The dims live inside (no heap: a map is made for every input on every run).
struct InputMap {
  enum Mode { contig, scalar, gather } mode = contig;
  int rank = 0;                                    ///< gather: the number of collapsed dims
  int64_t dims[kMaxRank] = {}, strides[kMaxRank] = {};  ///< gather: collapsed output dims and the input's strides over them (0: broadcast)
  int64_t numel = 0;
};

/// Maps input shape `in` onto output shape `out` (which it broadcasts to).
inline InputMap make_map(const Shape& in, const Shape& out) {
  InputMap m;
  m.numel = in.numel();
  if (m.numel == out.numel()) return m;  // broadcasting only adds 1s: same flat layout
  if (m.numel == 1) {
    m.mode = InputMap::scalar;
    return m;
  }
  m.mode = InputMap::gather;
  int r = out.rank(), off = r - in.rank();
  int64_t st[kMaxRank] = {};
  int64_t s = 1;
  for (int i = r - 1; i >= off; --i) {
    int64_t d = in[i - off];
    st[i] = d == 1 ? 0 : s;
    s *= d;
  }
  // Collapse: drop size-1 output dims, then merge a dim into its inner neighbour when the strides chain:
  // dims (outer a, inner b) merge when stride_a == stride_b * dim_b (both 0 included).
  for (int i = 0; i < r; ++i) {
    if (out[i] == 1) continue;
    if (m.rank > 0 && m.strides[m.rank - 1] == st[i] * out[i]) {
      m.dims[m.rank - 1] *= out[i];
      m.strides[m.rank - 1] = st[i];
    } else {
      m.dims[m.rank] = out[i];
      m.strides[m.rank] = st[i];
      ++m.rank;
    }
  }
  return m;
}

/// The per-run arrays (one entry per input, node or gradient target): per-thread, grown on demand and never
/// shrunk, so that a run whose sizes were seen before allocates nothing. Every use, the CPU kernel's chunk arrays
/// included, has its own tag in this one list: the caller's arrays stay live while it runs its share of a
/// parallel_for, beside the arrays the chunks use.
enum Tag : int { in_tensors, in_data, in_maps, grad_target, grad_outs, grad_dxs, grad_needs, grad_tmode, grad_tnumel, grad_tacc, grad_used,
                 grad_acc, chunk_stack, chunk_scalar, chunk_val, chunk_adj, chunk_written };
template <class T, Tag tag>
inline T* array(size_t n) {
  thread_local std::vector<T> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

/// The broadcast shape of `xs[0, n)` at run time; an oar::Error naming every shape when they do not broadcast.
inline Shape out_shape(const KernelContext& c, const LoDTensor* const* xs, size_t n) {
  Shape out = xs[0]->shape();
  bool ok = true;
  for (size_t i = 1; i < n && ok; ++i) ok = ops::fused::broadcast(out, xs[i]->shape(), out);
  if (!ok) {
    std::vector<Shape> s;
    for (size_t i = 0; i < n; ++i) s.push_back(xs[i]->shape());
    c.fail("input shapes {} do not broadcast (numpy rules: right-aligned dims must be equal or 1)", ops::fused::shapes_str(s));
  }
  return out;
}

/// The inputs X of `c` (checked to share one dtype), their broadcast shape `os` and how each maps onto it.
/// Returns the number of inputs; `xs` and `maps` point at per-thread arrays.
inline size_t inputs(const KernelContext& c, Slot x, const LoDTensor**& xs, InputMap*& maps, Shape& os) {
  const size_t n = c.num_in(x);
  c.check(n > 0, "needs at least one input X");
  xs = array<const LoDTensor*, in_tensors>(n);
  for (size_t i = 0; i < n; ++i) xs[i] = &c.in(x, i);
  for (size_t i = 1; i < n; ++i)
    c.check(xs[i]->dtype() == xs[0]->dtype(), "every X must have one dtype: X[0] is {} but X[{}] is {}", name(xs[0]->dtype()), i, name(xs[i]->dtype()));
  os = out_shape(c, xs, n);
  maps = array<InputMap, in_maps>(n);
  for (size_t i = 0; i < n; ++i) maps[i] = make_map(xs[i]->shape(), os);
  return n;
}

/// target[i]: the X@GRAD variable input i adds its gradient to, numbered in order of first use (-1: none
/// wanted); inputs that share one variable add up. Returns how many distinct variables there are.
inline size_t grad_targets(const KernelContext& c, int* target) {
  using F = ops::FusedElementwise;
  const size_t n = c.num_in(F::x);
  std::fill(target, target + n, -1);
  Value** outs = array<Value*, grad_outs>(n);
  size_t nt = 0;
  for (size_t i = 0; i < n && i < c.num_out(F::x_grad); ++i) {
    Value* v = c.out_value(F::x_grad, i);
    if (!v) continue;
    Value** it = std::find(outs, outs + nt, v);
    target[i] = int(it - outs);
    if (it == outs + nt) outs[nt++] = v;
  }
  return nt;
}

/// What both devices' gradient kernels start from: the targets, the inputs and their maps onto the broadcast
/// shape, and Out@GRAD checked against that shape.
struct GradPlan {
  int* target = nullptr;
  const LoDTensor** xs = nullptr;
  InputMap* maps = nullptr;
  Shape os;
  const LoDTensor* dout = nullptr;
};
/// Fills `g` and returns the number of gradient targets; 0 (and `g` left unfilled) when none is wanted.
inline size_t grad_plan(const KernelContext& c, GradPlan& g) {
  using F = ops::FusedElementwise;
  g.target = array<int, grad_target>(c.num_in(F::x));
  const size_t nt = grad_targets(c, g.target);
  if (nt == 0) return 0;
  inputs(c, F::x, g.xs, g.maps, g.os);
  g.dout = &c.in(F::out_grad);
  c.check(g.dout->shape() == g.os, "Out@GRAD {} does not match the broadcast shape {} of X", g.dout->shape(), g.os);
  return nt;
}

}  // namespace oar::kernels::fused
