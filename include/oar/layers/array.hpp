// oar/layers/array.hpp: the layer functions of tensor arrays (create_array, array_write, array_read,
// array_length) and of rank tables (lod_rank_table, max_sequence_len, lod_tensor_to_array, array_to_lod_tensor,
// shrink_memory, reorder_lod_tensor_by_rank): what While loops and DynamicRNN are written with. Bodies in
// array-inl.hpp; the ops are ops/tensor_array.hpp and ops/lod_rank_table.hpp.
#pragma once
#include <source_location>

#include "oar/tape/tape.hpp"

namespace oar {

/// A new, empty tensor array whose entries are `dtype` (a variable of kind lod_tensor_array; no op). Only
/// array_write adds entries; each run of a program starts with its arrays empty.
///   auto steps = oar::create_array(oar::f32);
Var create_array(DType dtype, std::source_location loc = std::source_location::current());
/// array[i] = a copy of x (with its LoD), growing the array to i + 1 entries when shorter. Writes `array` in
/// place and returns it: read the returned Var, so that the read comes after the write on the tape.
/// x: [d...], i: i64 [1]. Gradient: x's is the array's gradient at i (zeros when nothing reads that entry).
///   arr = oar::array_write(h, i, arr);
Var array_write(const Var& x, const Var& i, const Var& array, std::source_location loc = std::source_location::current());
/// A copy of array[i]; an error at run time when i is out of range. -> [d...] of the array's dtype.
Var array_read(const Var& array, const Var& i, std::source_location loc = std::source_location::current());
/// The number of entries of the array: i64 [1].
Var array_length(const Var& array, std::source_location loc = std::source_location::current());

/// The rank table of x's sequences: (original index, length) per sequence, longest first, ties in original
/// order. x: [N, ...] with exactly one LoD level; `level` must be 0. -> a rank table (i64 [S, 2] at run time).
///   auto table = oar::lod_rank_table(words);
Var lod_rank_table(const Var& x, int level = 0, std::source_location loc = std::source_location::current());
/// The longest sequence length of the table: i64 [1] (0 for no sequences).
Var max_sequence_len(const Var& table, std::source_location loc = std::source_location::current());
/// The steps of x's sequences: entry t holds row t of every sequence longer than t, in rank-table order.
/// x: [N, d...] (one LoD level) -> array of [k_t, d...]. Differentiable.
Var lod_tensor_to_array(const Var& x, const Var& table, std::source_location loc = std::source_location::current());
/// The inverse of lod_tensor_to_array: a [N, d...] tensor with one LoD level (the table's lengths, sequences in
/// original order) whose rows come from the array's entries. Differentiable.
Var array_to_lod_tensor(const Var& x, const Var& table, std::source_location loc = std::source_location::current());
/// The first k rows of x, k = the number of sequences longer than i (a DynamicRNN memory at step i).
/// x: [n, d...], i: i64 [1] -> [k, d...]. Differentiable (the dropped rows get zero gradient).
Var shrink_memory(const Var& x, const Var& i, const Var& table, std::source_location loc = std::source_location::current());
/// x's rows (x without LoD: one row per sequence) or sequences (x with one LoD level) in rank-table order.
/// Differentiable.
Var reorder_lod_tensor_by_rank(const Var& x, const Var& table, std::source_location loc = std::source_location::current());

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/array-inl.hpp"
#endif
