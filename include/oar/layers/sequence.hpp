// oar/layers/sequence.hpp: the layer functions of the sequence ops over LoD tensors: sequence_pool, sequence_softmax, sequence_expand, sequence_concat, lod_reset, sequence_mask.
// A sequence input is a Var whose LoD level is >= 1 (`oar::data("words", ...).lod_level(1)`); its LoD arrives
// with the fed LoDTensor. Bodies in sequence-inl.hpp; the ops are ops/sequence_*.hpp and ops/lod_reset.hpp.
#pragma once
#include <source_location>
#include <vector>

#include "oar/layers/layer_var.hpp"
#include "oar/ops/sequence_expand.hpp"
#include "oar/ops/sequence_mask.hpp"

namespace oar {

/// What sequence_pool takes of each sequence.
enum class SequencePoolType { average, sum, sqrt, max, last, first };

/// One row per last-level sequence: the average, sum, sum / sqrt(len), max, last or first of its rows; an
/// empty sequence gives zeros. x: [N, ...] with LoD -> [S, ...], one LoD level fewer.
///   auto sentence = oar::sequence_pool(words, oar::SequencePoolType::max);
Var sequence_pool(const Var& x, SequencePoolType type, std::source_location loc = std::source_location::current());
/// The first row of each sequence (sequence_pool FIRST).
Var sequence_first_step(const Var& x, std::source_location loc = std::source_location::current());
/// The last row of each sequence (sequence_pool LAST).
Var sequence_last_step(const Var& x, std::source_location loc = std::source_location::current());

/// Softmax inside each sequence of a column of scores. x: [N, 1] (or [N]) with LoD -> the same shape and LoD.
///   auto weights = oar::sequence_softmax(oar::fc(words, 1));
Var sequence_softmax(const Var& x, std::source_location loc = std::source_location::current());

/// sequence_expand's result. Options: `.ref_level(k)` (default -1, the last level of y's LoD).
class SequenceExpandLayer : public LayerVar<SequenceExpandLayer> {
 public:
  using LayerVar::LayerVar;
  struct keys {
    static constexpr Attr<int32_t> ref_level = ops::SequenceExpand::ref_level;
  };
  /// The level of y's LoD whose sequence lengths are the repeat counts.
  SequenceExpandLayer& ref_level(int k) { return option(keys::ref_level, k); }
};

/// Row i of x (sequence i when x has one LoD level) repeated as many times as y's sequence i at ref_level is
/// long. x: [M, ...] -> [rows, ...] with one LoD level: each copy a sequence (x with LoD), or the copies of
/// row i as sequence i (x without). y's values are not read.
///   auto per_word = oar::sequence_expand(sentence_vec, words);   // one copy of each sentence's row per word
SequenceExpandLayer sequence_expand(const Var& x, const Var& y, std::source_location loc = std::source_location::current());

/// Sequence i of every input joined, in order, into sequence i of the result. Inputs: one LoD level, the same
/// number of sequences, the same dims after the first. -> [sum of rows, ...], LoD the sums of the offsets.
Var sequence_concat(std::vector<Var> xs, std::source_location loc = std::source_location::current());

/// x's values with y's LoD (or, when y has none, y's i32 / i64 values as level-0 offsets).
Var lod_reset(const Var& x, const Var& y, std::source_location loc = std::source_location::current());
/// x's values with the one-level LoD `target_lod` (offsets from 0 to x's rows): `oar::lod_reset(x, {0, 2, 5})`.
Var lod_reset(const Var& x, std::vector<int32_t> target_lod, std::source_location loc = std::source_location::current());

/// sequence_mask's result. Options: `.maxlen(n)` (default: the largest length), `.dtype(t)` (default i64).
class SequenceMaskLayer : public LayerVar<SequenceMaskLayer> {
 public:
  using LayerVar::LayerVar;
  struct keys {
    static constexpr Attr<int32_t> maxlen = ops::SequenceMask::maxlen, dtype = ops::SequenceMask::out_dtype;
  };
  /// The mask's last dim (lengths beyond it are cut).
  SequenceMaskLayer& maxlen(int n) { return option(keys::maxlen, n); }
  /// The mask's element type.
  SequenceMaskLayer& dtype(DType t) { return option(keys::dtype, int32_t(t)); }
  using Var::dtype;  // the getter
};

/// mask[..., j] = j < lengths[...]: lengths i64 (or i32) [d...] -> [d..., maxlen]; no gradient.
///   auto m = oar::sequence_mask(lengths).maxlen(10).dtype(oar::f32);
SequenceMaskLayer sequence_mask(const Var& lengths, std::source_location loc = std::source_location::current());

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/sequence-inl.hpp"
#endif
