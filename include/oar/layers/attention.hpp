// oar/layers/attention.hpp: attention as layers (docs/attention.md): scaled_dot_product_attention (one op,
// dense or over LoD sequences without padding), the position ops, multi_head_attention, and the Transformer's
// encoder and decoder layers built from them. The bodies are in attention-inl.hpp.
#pragma once
#include <source_location>

#include "oar/layers/layer_var.hpp"
#include "oar/ops/attention.hpp"

namespace oar {

/// scaled_dot_product_attention's result. Options: `.causal()`, `.mask(m)`, `.scale(s)` (default 1 / sqrt(d)),
/// `.dropout(p)` on the attention weights, `.is_test()`, `.seed(s)` (a fixed dropout seed).
class AttentionLayer : public LayerVar<AttentionLayer> {
 public:
  using LayerVar::LayerVar;
  struct keys {
    static constexpr Attr<bool> causal = ops::ScaledDotProductAttention::causal, is_test = ops::ScaledDotProductAttention::is_test,
                                fix_seed = ops::ScaledDotProductAttention::fix_seed;
    static constexpr Attr<float> scale = ops::ScaledDotProductAttention::scale, dropout_prob = ops::ScaledDotProductAttention::dropout_prob;
    static constexpr Attr<int32_t> seed = ops::ScaledDotProductAttention::seed;
  };
  /// Query i sees key j only when j <= i + Tk - Tq (a decoder's self-attention; with cached keys the new
  /// queries see every key before them).
  AttentionLayer& causal(bool on = true) { return option(keys::causal, on); }
  /// Dense input only: [Tq, Tk] or [B|1, H|1, Tq, Tk]; float: added to the scores; bool: false drops the key.
  /// `m` must be recorded before the attention.
  AttentionLayer& mask(const Var& m);
  /// Multiplies the scores instead of 1 / sqrt(d).
  AttentionLayer& scale(double s) { return option(keys::scale, float(s)); }
  /// Drops attention weights with probability p in training (scaled by 1 / (1 - p)).
  AttentionLayer& dropout(double p) { return option(keys::dropout_prob, float(p)); }
  /// Inference: no dropout; `Program::clone(true)` sets it too.
  AttentionLayer& is_test(bool on = true) { return option(keys::is_test, on); }
  /// A fixed dropout seed (the same masks every run).
  AttentionLayer& seed(int s) {
    option(keys::fix_seed, true);
    return option(keys::seed, s);
  }
};

/// softmax(q k^T / sqrt(d) + mask) v for every batch entry and head, as one op that never holds the T x T
/// scores whole. Dense: q [B, H, Tq, d], k [B, H, Tk, d], v [B, H, Tk, dv] -> [B, H, Tq, dv]. LoD sequences
/// (lod_level 1): q [Nq, H, d], k and v [Nk, H, d|dv], sequence s of q attending to sequence s of k only, no
/// padding anywhere -> [Nq, H, dv] with q's LoD.
///   auto o = oar::scaled_dot_product_attention(q, k, v).causal();
AttentionLayer scaled_dot_product_attention(const Var& q, const Var& k, const Var& v, std::source_location loc = std::source_location::current());
/// The same with a mask (dense only): [Tq, Tk] or [B|1, H|1, Tq, Tk]; float: added to the scores; bool:
/// false drops the key.
AttentionLayer scaled_dot_product_attention(const Var& q, const Var& k, const Var& v, const Var& mask,
                                            std::source_location loc = std::source_location::current());

/// x + fixed sinusoids of each row's position (add_position_encoding: the sines in the first half of the
/// features, the cosines in the second): x dense [B, T, D] or LoD [N, D]; out = alpha x + beta PE.
Var add_position_encoding(const Var& x, double alpha = 1.0, double beta = 1.0, std::source_location loc = std::source_location::current());
/// The same with each sequence's first position from `offset` (int64 [S], one per sequence or dense batch row):
/// in a decoder with a key-value cache, `oar::cached_length(tokens)`.
Var add_position_encoding(const Var& x, double alpha, double beta, const Var& offset, std::source_location loc = std::source_location::current());
/// Queries or keys rotated by their position (rotary_position_embedding): x dense [B, H, T, d] or LoD
/// [N, H, d]; `offset` is added to every position.
Var rotary_position_embedding(const Var& x, int offset = 0, double base = 10000.0, std::source_location loc = std::source_location::current());
/// The same with each sequence's first position from `offset` (int64 [S], one per sequence or dense batch row).
Var rotary_position_embedding(const Var& x, const Var& offset, double base = 10000.0, std::source_location loc = std::source_location::current());

/// kv_cache's results: the cached rows followed by the new ones, and each sequence's cached row count before them.
struct CachedRows {
  Var rows;    ///< LoD [cached + N, ...] (sequence by sequence) or dense [B, H, cached + T, d]
  Var length;  ///< int64 [S]: the rows each sequence had cached before this run (the new rows' first position)
};
/// A decoder's key-value cache for incremental decoding (docs/attention.md): in an Evaluator built with
/// `EvaluatorOptions{.kv_cache = true}`, each run appends x's rows to those of earlier runs, sequence s of x
/// continuing cached sequence s, and `rows` is everything so far; elsewhere (training, other evaluators)
/// `rows` is x and `length` zeros. x: LoD [N, ...] or dense [B, H, T, d]. multi_head_attention's `kv_cache`
/// option puts one on its keys and values.
CachedRows kv_cache(const Var& x, std::source_location loc = std::source_location::current());
/// The rows each sequence of x had in earlier runs of a decoding Evaluator (int64 [S]; zeros elsewhere): the
/// `offset` of the position ops below the cached attention. Keeps counts, not rows.
///   h = oar::add_position_encoding(oar::embedding(ids, {vocab, 256}), 16.0, 1.0, oar::cached_length(ids));
Var cached_length(const Var& x, std::source_location loc = std::source_location::current());

/// Options of multi_head_attention.
struct AttentionOptions {
  bool causal = false;      ///< query i sees keys up to its own position
  double dropout = 0;       ///< on the attention weights, in training
  bool fused_qkv = false;   ///< self-attention: one projection to 3 d_model, split (one product instead of three)
  bool rotary = false;      ///< rotary position embedding on the queries and keys
  bool is_test = false;     ///< inference: no dropout (Program::clone(true) sets it too)
  /// Self-attention: keys and values go through kv_cache (a decoding Evaluator keeps them between runs) and the
  /// rotary positions start at each sequence's cached length.
  bool kv_cache = false;
};

/// Multi-head self-attention: x projected to queries, keys and values (fc, d_model each), split into `heads`
/// heads of d_model / heads, scaled_dot_product_attention per head, joined and projected by an fc of d_model.
/// x dense [B, T, d_model] -> [B, T, d_model], or LoD [N, d_model] -> [N, d_model] (ragged: each sequence
/// attends within itself, nothing padded).
///   auto h = oar::multi_head_attention(x, 4, 256, {.causal = true});
Var multi_head_attention(const Var& x, int heads, int64_t d_model, AttentionOptions o = {}, std::source_location loc = std::source_location::current());
/// Cross-attention: queries from x, keys and values from `memory` (an encoder's output; dense [B, S, d_model]
/// or LoD [M, d_model] with as many sequences as x).
Var multi_head_attention(const Var& x, const Var& memory, int heads, int64_t d_model, AttentionOptions o = {},
                         std::source_location loc = std::source_location::current());

/// Options of the Transformer layers.
struct TransformerOptions {
  int64_t d_ff = 0;         ///< the feed-forward layer's width; 0: 4 d_model
  double dropout = 0;       ///< after attention and the feed-forward layer, in training
  double attention_dropout = 0;
  bool pre_norm = true;     ///< layer_norm before each block (GPT-2); false: after each residual sum (the 2017 paper)
  bool rotary = false;      ///< rotary position embedding in the self-attention
  bool is_test = false;
  bool relu = false;        ///< the feed-forward activation: gelu, or relu
  bool kv_cache = false;    ///< the self-attention's keys and values cached for incremental decoding
};

/// x + self-attention, then + a two-layer feed-forward block, each with layer_norm (before or after) and
/// dropout: a Transformer encoder layer. x dense [B, T, d_model] or LoD [N, d_model].
Var transformer_encoder_layer(const Var& x, int heads, TransformerOptions o = {}, std::source_location loc = std::source_location::current());
/// The decoder layer: causal self-attention, then (with `memory`) cross-attention to it, then the
/// feed-forward block. Without memory it is a decoder-only model's (GPT's) layer.
Var transformer_decoder_layer(const Var& x, int heads, TransformerOptions o = {}, std::source_location loc = std::source_location::current());
Var transformer_decoder_layer(const Var& x, const Var& memory, int heads, TransformerOptions o = {},
                              std::source_location loc = std::source_location::current());

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/attention-inl.hpp"
#endif
