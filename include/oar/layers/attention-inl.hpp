// oar/layers/attention-inl.hpp: the implementation of attention.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/attention.hpp"

#include "oar/layers/activations.hpp"
#include "oar/layers/nn.hpp"
#include "oar/layers/op_layer.hpp"
#include "oar/layers/tensor.hpp"
#include "oar/ops/attention.hpp"
#include "oar/ops/position.hpp"
#include "oar/tape/replay.hpp"

namespace oar {

namespace detail {
inline ReplayFn attention_replay() {
  return [](LayerHelper& h) {
    const bool with_mask = h.num_inputs() > 3;  // the fourth argument, or .mask(m)
    using A = ops::ScaledDotProductAttention;
    const Variable& q = h.input_var(0);
    Variable& out = h.create_tmp(q.dtype());
    Variable& lse = h.create_tmp(q.dtype(), true);
    Variable& seed = h.create_tmp(DType::i64, true);
    Operator op{std::string(A::type)};
    op.set_input(A::q, {h.input(0)}).set_input(A::k, {h.input(1)}).set_input(A::v, {h.input(2)});
    if (with_mask) op.set_input(A::mask, {h.input(3)});
    op.set_output(A::out, {out.name()}).set_output(A::lse, {lse.name()}).set_output(A::seed_out, {seed.name()});
    h.apply_options(op);  // causal, scale, dropout_prob, is_test, fix_seed, seed: AttentionLayer's keys are the op's attributes
    h.append_op(std::move(op));
    return std::vector<std::string>{h.append_activation(out.name())};
  };
}
}  // namespace detail

OAR_FUNC AttentionLayer scaled_dot_product_attention(const Var& q, const Var& k, const Var& v, std::source_location loc) {
  return AttentionLayer(record_layer("scaled_dot_product_attention", {q, k, v}, detail::attention_replay(), loc)[0]);
}

OAR_FUNC AttentionLayer scaled_dot_product_attention(const Var& q, const Var& k, const Var& v, const Var& mask, std::source_location loc) {
  return AttentionLayer(record_layer("scaled_dot_product_attention", {q, k, v, mask}, detail::attention_replay(), loc)[0]);
}

OAR_FUNC AttentionLayer& AttentionLayer::mask(const Var& m) {
  if (creation().inputs.size() > 3) throw Error("scaled_dot_product_attention: a mask is given twice (an argument or .mask(m) before)", origin());
  add_input(m, "mask");
  return *this;
}

namespace detail {
/// A position op with the Offset input (the layer's second input).
inline ReplayFn position_replay(std::string_view type, std::map<std::string, Attribute> attrs) {
  return [type, attrs](LayerHelper& h) {
    const Variable& x = h.input_var(0);
    Variable& out = h.create_tmp(x.dtype());
    Operator op{std::string(type)};
    op.set_input(ops::AddPositionEncoding::x, {h.input(0)}).set_input(ops::AddPositionEncoding::offset, {h.input(1)});
    op.set_output(ops::AddPositionEncoding::out, {out.name()});
    for (auto& [k, v] : attrs) op.set_attr(k, v);
    h.append_op(std::move(op));
    return std::vector<std::string>{h.append_activation(out.name())};
  };
}

inline ReplayFn kv_cache_replay(bool count_only) {
  return [count_only](LayerHelper& h) {
    using K = ops::KvCache;
    const Variable& x = h.input_var(0);
    Variable& out = h.create_tmp(x.dtype());
    Variable& cache = h.create_tmp(count_only ? DType::i64 : x.dtype(), true);
    Variable& len = h.create_tmp(DType::i64, true);
    Operator op{std::string(K::type)};
    op.set_input(K::x, {h.input(0)}).set_input(K::cache, {cache.name()});
    op.set_output(K::out, {out.name()}).set_output(K::cache_out, {cache.name()}).set_output(K::length, {len.name()});
    op.set_attr(K::count_only, count_only);
    h.append_op(std::move(op));
    if (count_only) return std::vector<std::string>{len.name()};
    return std::vector<std::string>{out.name(), len.name()};
  };
}
}  // namespace detail

OAR_FUNC CachedRows kv_cache(const Var& x, std::source_location loc) {
  std::vector<Var> o = record_layer("kv_cache", {x}, detail::kv_cache_replay(false), loc, 2);
  return {o[0], o[1]};
}

OAR_FUNC Var cached_length(const Var& x, std::source_location loc) { return record_layer("cached_length", {x}, detail::kv_cache_replay(true), loc)[0]; }

OAR_FUNC Var add_position_encoding(const Var& x, double alpha, double beta, const Var& offset, std::source_location loc) {
  using P = ops::AddPositionEncoding;
  return record_layer("add_position_encoding", {x, offset},
                      detail::position_replay(P::type, {{std::string(P::alpha.name), to_attribute(float(alpha))}, {std::string(P::beta.name), to_attribute(float(beta))}}),
                      loc)[0];
}

OAR_FUNC Var rotary_position_embedding(const Var& x, const Var& offset, double base, std::source_location loc) {
  using R = ops::RotaryPositionEmbedding;
  return record_layer("rotary_position_embedding", {x, offset}, detail::position_replay(R::type, {{std::string(R::base.name), to_attribute(float(base))}}), loc)[0];
}

OAR_FUNC Var add_position_encoding(const Var& x, double alpha, double beta, std::source_location loc) {
  using P = ops::AddPositionEncoding;
  return record_unary_layer<P>(x, {{std::string(P::alpha.name), to_attribute(float(alpha))}, {std::string(P::beta.name), to_attribute(float(beta))}}, loc);
}

OAR_FUNC Var rotary_position_embedding(const Var& x, int offset, double base, std::source_location loc) {
  using R = ops::RotaryPositionEmbedding;
  return record_unary_layer<R>(x, {{std::string(R::offset.name), to_attribute(int32_t(offset))}, {std::string(R::base.name), to_attribute(float(base))}},
                               loc);
}

namespace detail {
/// [rows.., d_model] -> the attention op's layout: dense [B, T, d] -> [B, H, T, d / H]; LoD [N, d] -> [N, H, d / H].
inline Var split_heads(const Var& x, bool dense, int heads, int64_t dk, std::source_location loc) {
  if (!dense) return reshape(x, {0, int32_t(heads), int32_t(dk)}, loc);
  return transpose(reshape(x, {0, 0, int32_t(heads), int32_t(dk)}, loc), {0, 2, 1, 3}, loc);
}
inline Var join_heads(const Var& x, bool dense, int64_t d_model, std::source_location loc) {
  if (!dense) return reshape(x, {0, int32_t(d_model)}, loc);
  return reshape(transpose(x, {0, 2, 1, 3}, loc), {0, 0, int32_t(d_model)}, loc);
}
inline Var attend(const Var& x, const Var* memory, int heads, int64_t d_model, const AttentionOptions& o, std::source_location loc) {
  const int rank = x.shape().rank();
  if (rank != 2 && rank != 3)
    throw Error(fmt::format("multi_head_attention: x must be dense [B, T, d_model] or LoD [N, d_model], got {}", x.shape().str()), Origin(loc, "multi_head_attention"));
  if (heads < 1 || d_model % heads != 0)
    throw Error(fmt::format("multi_head_attention: d_model {} must split evenly into {} heads", d_model, heads), Origin(loc, "multi_head_attention"));
  const bool dense = rank == 3;
  const int fd = dense ? 2 : 1;
  const int64_t dk = d_model / heads;
  Var q, k, v;
  if (o.fused_qkv && !memory) {
    Var qkv = fc(x, 3 * d_model, loc).flatten_dims(fd);
    const int axis = rank - 1;
    q = slice(qkv, {axis}, {0}, {int32_t(d_model)}, loc);
    k = slice(qkv, {axis}, {int32_t(d_model)}, {int32_t(2 * d_model)}, loc);
    v = slice(qkv, {axis}, {int32_t(2 * d_model)}, {int32_t(3 * d_model)}, loc);
  } else {
    const Var& kv_in = memory ? *memory : x;
    q = fc(x, d_model, loc).flatten_dims(fd);
    k = fc(kv_in, d_model, loc).flatten_dims(fd);
    v = fc(kv_in, d_model, loc).flatten_dims(fd);
  }
  q = split_heads(q, dense, heads, dk, loc);
  k = split_heads(k, dense, heads, dk, loc);
  v = split_heads(v, dense, heads, dk, loc);
  if (o.kv_cache) {
    if (memory)
      throw Error("multi_head_attention: kv_cache is for self-attention (the memory's keys and values do not grow while decoding)", Origin(loc, "multi_head_attention"));
    // The values' cache gives the positions the new rows start at, before the keys are rotated and cached.
    CachedRows vc = kv_cache(v, loc);
    if (o.rotary) {
      q = rotary_position_embedding(q, vc.length, 10000.0, loc);
      k = rotary_position_embedding(k, vc.length, 10000.0, loc);
    }
    k = kv_cache(k, loc).rows;
    v = vc.rows;
  } else if (o.rotary) {
    q = rotary_position_embedding(q, 0, 10000.0, loc);
    k = rotary_position_embedding(k, 0, 10000.0, loc);
  }
  AttentionLayer a = scaled_dot_product_attention(q, k, v, loc);
  if (o.causal) a.causal();
  if (o.dropout > 0) a.dropout(o.dropout);
  if (o.is_test) a.is_test();
  return fc(join_heads(a, dense, d_model, loc), d_model, loc).flatten_dims(fd);
}
}  // namespace detail

OAR_FUNC Var multi_head_attention(const Var& x, int heads, int64_t d_model, AttentionOptions o, std::source_location loc) {
  return detail::attend(x, nullptr, heads, d_model, o, loc);
}

OAR_FUNC Var multi_head_attention(const Var& x, const Var& memory, int heads, int64_t d_model, AttentionOptions o, std::source_location loc) {
  return detail::attend(x, &memory, heads, d_model, o, loc);
}

namespace detail {
inline Var transformer_layer(const Var& x, const Var* memory, bool causal, int heads, const TransformerOptions& o, std::source_location loc) {
  const int rank = x.shape().rank();
  const int64_t d_model = x.shape()[rank - 1];
  if (d_model <= 0) throw Error(fmt::format("transformer layer: the feature size of x {} must be known", x.shape().str()), Origin(loc, "transformer layer"));
  const int norm_axis = rank - 1;
  auto norm = [&](const Var& v) { return Var(layer_norm(v, loc).begin_norm_axis(norm_axis)); };
  auto drop = [&](const Var& v) {
    if (o.dropout <= 0) return v;
    DropoutLayer d = dropout(v, o.dropout, loc);
    d.upscale_in_train();
    if (o.is_test) d.is_test();
    return Var(d);
  };
  // One residual block: pre-norm: h + f(norm(h)); post-norm: norm(h + f(h)).
  auto block = [&](const Var& h, auto&& f) {
    if (o.pre_norm) return elementwise_add(h, drop(f(norm(h))), -1, loc);
    return norm(elementwise_add(h, drop(f(h)), -1, loc));
  };
  AttentionOptions self{.causal = causal, .dropout = o.attention_dropout, .rotary = o.rotary, .is_test = o.is_test, .kv_cache = o.kv_cache};
  Var h = block(x, [&](const Var& in) { return multi_head_attention(in, heads, d_model, self, loc); });
  if (memory) {
    AttentionOptions cross{.dropout = o.attention_dropout, .is_test = o.is_test};
    h = block(h, [&](const Var& in) { return multi_head_attention(in, *memory, heads, d_model, cross, loc); });
  }
  const int64_t d_ff = o.d_ff > 0 ? o.d_ff : 4 * d_model;
  const int fd = rank - 1;
  h = block(h, [&](const Var& in) {
    Var f = fc(in, d_ff, loc).flatten_dims(fd).act(o.relu ? static_cast<const Activation&>(relu) : static_cast<const Activation&>(gelu));
    return Var(fc(f, d_model, loc).flatten_dims(fd));
  });
  return h;
}
}  // namespace detail

OAR_FUNC Var transformer_encoder_layer(const Var& x, int heads, TransformerOptions o, std::source_location loc) {
  return detail::transformer_layer(x, nullptr, false, heads, o, loc);
}

OAR_FUNC Var transformer_decoder_layer(const Var& x, int heads, TransformerOptions o, std::source_location loc) {
  return detail::transformer_layer(x, nullptr, true, heads, o, loc);
}

OAR_FUNC Var transformer_decoder_layer(const Var& x, const Var& memory, int heads, TransformerOptions o, std::source_location loc) {
  return detail::transformer_layer(x, &memory, true, heads, o, loc);
}

}  // namespace oar
