// oar/layers/sequence_shape.hpp: the layer functions of the sequence ops that window or re-cut sequences: sequence_conv, sequence_reshape, sequence_slice, sequence_pad, sequence_unpad.
// Their inputs are LoD tensors (a data layer with `.lod_level(1)`, fed with a LoD); the bodies are in sequence_shape-inl.hpp.
#pragma once
#include <source_location>

#include "oar/layers/layer_var.hpp"
#include "oar/layers/sequence.hpp"
#include "oar/ops/sequence_conv.hpp"
#include "oar/ops/sequence_pad.hpp"

namespace oar {

/// sequence_conv's result. Options: `.context_start(k)` (default -(filter_size / 2)), and `.act`, `.param`
/// (the filter), `.bias`.
class SequenceConvLayer : public LayerVar<SequenceConvLayer> {
 public:
  using LayerVar::LayerVar;
  struct keys {
    static constexpr Attr<int32_t> context_start = ops::SequenceConv::context_start;
  };
  /// Offset of each window's first row from the output row (negative: rows before it).
  SequenceConvLayer& context_start(int k) { return option(keys::context_start, k); }
};

/// Convolution along the rows of each sequence: out[r] = act([x[r + k], ..., x[r + k + filter_size - 1]] W + b),
/// k = context_start, where rows outside r's own sequence count as zeros.
/// x: [N, D] with LoD -> [N, num_filters] with x's LoD; W: [filter_size * D, num_filters], Xavier; b: [num_filters], zero.
/// Options: `.context_start(k)`, `.act`, `.param`, `.bias(false)`.
///   auto h = oar::sequence_conv(words, 64, 3).act(oar::tanh);
SequenceConvLayer sequence_conv(const Var& x, int64_t num_filters, int64_t filter_size = 3, std::source_location loc = std::source_location::current());

/// Fluid's nets.sequence_conv_pool: sequence_conv (with bias) then `act`, then sequence_pool of each sequence by
/// `pool`: x [N, D] with LoD -> [S, num_filters], one row per sequence. Its parameters are sequence_conv's.
///   auto sentence = oar::sequence_conv_pool(words, 64, 3);  // sigmoid, max, as in Fluid
Var sequence_conv_pool(const Var& x, int64_t num_filters, int64_t filter_size = 3, const Activation& act = Activation{"sigmoid"},
                       SequencePoolType pool = SequencePoolType::max, std::source_location loc = std::source_location::current());

/// Rows re-cut to new_dim columns within each sequence: x: [N, D] with LoD -> [N * D / new_dim, new_dim], each
/// sequence's length scaled by D / new_dim (an error at run time where a sequence's len * D does not divide).
///   auto pairs = oar::sequence_reshape(x, 2 * x_dim);  // two rows become one
Var sequence_reshape(const Var& x, int64_t new_dim, std::source_location loc = std::source_location::current());

/// Rows [offset[i], offset[i] + length[i]) of each sequence i. x with LoD; offset, length: i64 [S, 1]
/// -> the sub-sequences, with their LoD.
Var sequence_slice(const Var& x, const Var& offset, const Var& length, std::source_location loc = std::source_location::current());

/// sequence_pad's result: the padded batch [S, padded_length, step...]; `.length()` is the lengths (i64 [S]).
/// Options: `.padded_length(n)` (default -1: the longest sequence).
class SequencePadLayer : public LayerVar<SequencePadLayer> {
 public:
  SequencePadLayer() = default;
  SequencePadLayer(const Var& padded, const Var& length) : LayerVar(padded), length_(length) {}
  struct keys {
    static constexpr Attr<int32_t> padded_length = ops::SequencePad::padded_length;
  };
  /// Steps per padded sequence (at least the longest sequence's; -1: exactly that).
  SequencePadLayer& padded_length(int n) { return option(keys::padded_length, n); }
  /// The length of each sequence: i64 [S] (sequence_unpad's second input).
  const Var& length() const { return length_; }

 private:
  Var length_;
};

/// A dense batch from the sequences of x (its first LoD level): out[s, t] = row t of sequence s, or pad_value
/// past its end. x: [N, step...] with LoD, pad_value: [1] or [step...] -> [S, padded_length, step...] without LoD.
/// Options: `.padded_length(n)`.
///   auto p = oar::sequence_pad(x, zero).padded_length(10);
///   auto back = oar::sequence_unpad(p, p.length());
SequencePadLayer sequence_pad(const Var& x, const Var& pad_value, std::source_location loc = std::source_location::current());

/// The inverse of sequence_pad: the first length[s] steps of each x[s], stacked into a LoD tensor.
/// x: [S, L, step...], length: i64 [S] -> [sum(length), step...] with LoD [[0, length[0], ...]].
Var sequence_unpad(const Var& x, const Var& length, std::source_location loc = std::source_location::current());

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/sequence_shape-inl.hpp"
#endif
