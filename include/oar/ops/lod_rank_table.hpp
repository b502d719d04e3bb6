// oar/ops/lod_rank_table.hpp: the rank-table ops Fluid's DynamicRNN is written with. A rank table lists a LoD
// tensor's sequences longest first (ties in their original order); at run time it is an i64 tensor [S, 2] of
// rows (original sequence index, length). lod_rank_table builds it; max_sequence_len, lod_tensor_to_array,
// array_to_lod_tensor, shrink_rnn_memory and reorder_lod_tensor_by_rank read it. Kernels in
// kernels/cpu/lod_rank_table.hpp. Only one LoD level is supported.
#pragma once
#include "oar/ops/op.hpp"
#include "oar/ops/tensor_array.hpp"

namespace oar::ops {

namespace array_detail {
/// Input `slot` must be a rank table (made by lod_rank_table).
inline void check_rank_table(InferShapeContext& c, Slot slot) {
  const Variable& v = c.input_var(slot);
  c.check(v.kind() == VarKind::lod_rank_table, "{} ('{}') must be a rank table (made by lod_rank_table)", slot.name, v.name());
}
}  // namespace array_detail

/// The rank table of x's sequences at LoD level `level`: rows (original index, length), longest first, ties in
/// original order (a stable sort). X [N, ...] with exactly one LoD level (level 0) -> Out: rank table, i64 [S, 2].
/// No gradient.
struct LoDRankTable {
  static constexpr std::string_view type = "lod_rank_table";
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Attr<int32_t> level{"level"};
  struct Attrs {
    int32_t level;
    explicit Attrs(const AttrReader& r) : level(r(LoDRankTable::level)) {}
  };
  static OpDef def() {
    return OpDef(type, "the sequences of X sorted by length, longest first: rows (index, length)")
        .in(x).out(out)
        .attr(level, 0, "the LoD level whose sequences are ranked (only 0 is supported)")
        .check<int32_t>([](int32_t v) { return v == 0; }, "must be 0: only tensors with one LoD level are supported");
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(c.lod_level(x) <= 1, "X ('{}') has {} LoD levels; only tensors with exactly one are supported", c.op().input(x)[0], c.lod_level(x));
    c.set_output(out, Shape{-1, 2}, DType::i64, 0);
    c.output_var(out).set_kind(VarKind::lod_rank_table).set_stop_gradient(true);
  }
  static void eval_cpu(KernelContext&, const Attrs&);  // kernels/cpu/lod_rank_table.hpp
  static constexpr bool any_place = true;  // its kernels serve CUDA too (rows copied on the place)
};

/// out = the longest sequence length of the rank table (0 when it lists no sequence). RankTable -> Out i64 [1].
/// No gradient.
struct MaxSequenceLen {
  static constexpr std::string_view type = "max_sequence_len";
  static constexpr Slot rank_table{"RankTable"}, out{"Out"};
  static OpDef def() { return OpDef(type, "Out = the longest length in the rank table").in(rank_table).out(out); }
  static void infer_shape(InferShapeContext& c) {
    array_detail::check_rank_table(c, rank_table);
    c.set_output(out, Shape{1}, DType::i64, 0);
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/lod_rank_table.hpp
  static constexpr bool any_place = true;  // its kernels serve CUDA too (rows copied on the place)
};

/// Splits x's sequences into time steps: out[t] holds row t of every sequence longer than t, in rank-table
/// order. X [N, d...] (one LoD level, or none: the table's lengths then give the sequences in original order),
/// RankTable -> Out: array of max-length entries [k_t, d...] without LoD, k_t = sequences longer than t.
/// Grad: lod_tensor_to_array_grad(X, RankTable, Out@GRAD) -> X@GRAD: array_to_lod_tensor of Out@GRAD, its
/// missing or empty entries taken as zeros.
struct LoDTensorToArray {
  static constexpr std::string_view type = "lod_tensor_to_array";
  static constexpr Slot x{"X"}, rank_table{"RankTable"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static OpDef def() { return OpDef(type, "Out[t] = row t of each sequence of X longer than t, in rank-table order").in(x).in(rank_table).out(out); }
  static void infer_shape(InferShapeContext& c) {
    array_detail::check_rank_table(c, rank_table);
    c.check(c.lod_level(x) <= 1, "X ('{}') has {} LoD levels; only tensors with one are supported", c.op().input(x)[0], c.lod_level(x));
    c.check(c.shape(x).rank() >= 1, "X must have rows (rank >= 1), got {}", c.shape(x).str());
    c.set_output(out, array_detail::rows_unknown(c.shape(x)), c.dtype(x), 0);
    c.output_var(out).set_kind(VarKind::lod_tensor_array);
  }
  /// lod_tensor_to_array_grad(X, RankTable, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(x)) return {};
    return {g.grad_op({.inputs = {x, rank_table}, .output_grads = {out}, .input_grads = {x}}, GradContext::without_attrs)};
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);       // kernels/cpu/lod_rank_table.hpp
  static void eval_grad_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/lod_rank_table.hpp
  static constexpr bool any_place = true;  // its kernels serve CUDA too (rows copied on the place)
};

/// The inverse of lod_tensor_to_array: sequence s (in original order) gathers row t from entry t, at the
/// entry's row given by s's place in the rank table. X: array of entries [k_t, d...], RankTable -> Out
/// [N, d...] with one LoD level (the table's lengths in original order). Every entry must hold k_t rows.
/// Grad: lod_tensor_to_array(Out@GRAD, RankTable) -> X@GRAD.
struct ArrayToLoDTensor {
  static constexpr std::string_view type = "array_to_lod_tensor";
  static constexpr Slot x{"X"}, rank_table{"RankTable"}, out{"Out"};
  static OpDef def() { return OpDef(type, "the LoD tensor whose time steps are the entries of the array X").in(x).in(rank_table).out(out); }
  static void infer_shape(InferShapeContext& c) {
    array_detail::check_array(c, x);
    array_detail::check_rank_table(c, rank_table);
    c.set_output(out, array_detail::rows_unknown(c.shape(x)), c.dtype(x), 1);
  }
  /// lod_tensor_to_array(X = Out@GRAD, RankTable) -> Out = X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    const auto dx = g.input_grad(x);
    if (!g.wants_grad(x)) return {};
    using L = LoDTensorToArray;
    Operator op = g.new_op(L::type);
    op.set_input(L::x, g.output_grad(out)).set_input(L::rank_table, g.input(rank_table)).set_output(L::out, dx);
    return {op};
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/lod_rank_table.hpp
  static constexpr bool any_place = true;  // its kernels serve CUDA too (rows copied on the place)
};

/// The memory of a DynamicRNN at step i: the first k rows of x, k = the number of sequences longer than i
/// (the table's rows are longest first, so they are the sequences still running). X [n, d...] (n >= k), I i64
/// [1], RankTable -> Out [k, d...]. Grad: shrink_rnn_memory_grad(X, Out@GRAD) -> X@GRAD = Out@GRAD's rows, then
/// zeros, shaped like X.
struct ShrinkRNNMemory {
  static constexpr std::string_view type = "shrink_rnn_memory";
  static constexpr Slot x{"X"}, i{"I"}, rank_table{"RankTable"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static OpDef def() { return OpDef(type, "Out = the rows of X of the sequences longer than I").in(x).in(i).in(rank_table).out(out); }
  static void infer_shape(InferShapeContext& c) {
    array_detail::check_index(c, i);
    array_detail::check_rank_table(c, rank_table);
    c.check(c.shape(x).rank() >= 1, "X must have rows (rank >= 1), got {}", c.shape(x).str());
    c.set_output(out, array_detail::rows_unknown(c.shape(x)), c.dtype(x), 0);
  }
  /// shrink_rnn_memory_grad(X, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(x)) return {};
    return {g.grad_op({.inputs = {x}, .output_grads = {out}, .input_grads = {x}}, GradContext::without_attrs)};
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);       // kernels/cpu/lod_rank_table.hpp
  static void eval_grad_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/lod_rank_table.hpp
  static constexpr bool any_place = true;  // its kernels serve CUDA too (rows copied on the place)
};

/// x's rows (x without LoD: one row per sequence, [S, d...]) or x's sequences (x with one LoD level, S of them)
/// in rank-table order: out's r-th row (sequence) is x's table[r].index-th. X, RankTable -> Out [N, d...] with
/// the reordered LoD when X has one. Grad: reorder_lod_tensor_by_rank_grad(X, RankTable, Out@GRAD) -> X@GRAD,
/// the inverse permutation.
struct ReorderLoDTensorByRank {
  static constexpr std::string_view type = "reorder_lod_tensor_by_rank";
  static constexpr Slot x{"X"}, rank_table{"RankTable"}, out{"Out"}, x_grad{"X@GRAD"}, out_grad{"Out@GRAD"};
  static OpDef def() { return OpDef(type, "X's rows or sequences in rank-table order").in(x).in(rank_table).out(out); }
  static void infer_shape(InferShapeContext& c) {
    array_detail::check_rank_table(c, rank_table);
    c.check(c.lod_level(x) <= 1, "X ('{}') has {} LoD levels; only tensors with at most one are supported", c.op().input(x)[0], c.lod_level(x));
    c.check(c.shape(x).rank() >= 1, "X must have rows (rank >= 1), got {}", c.shape(x).str());
    c.set_output(out, c.shape(x), c.dtype(x));
    c.share_lod(x, out);
  }
  /// reorder_lod_tensor_by_rank_grad(X, RankTable, Out@GRAD) -> X@GRAD
  static std::vector<Operator> grad(const GradContext& g) {
    if (!g.wants_grad(x)) return {};
    return {g.grad_op({.inputs = {x, rank_table}, .output_grads = {out}, .input_grads = {x}}, GradContext::without_attrs)};
  }
  static void eval_cpu(KernelContext&, const NoAttrs&);       // kernels/cpu/lod_rank_table.hpp
  static void eval_grad_cpu(KernelContext&, const NoAttrs&);  // kernels/cpu/lod_rank_table.hpp
  static constexpr bool any_place = true;  // its kernels serve CUDA too (rows copied on the place)
};

}  // namespace oar::ops
