// tests/layers/attention.cpp: multi_head_attention and the Transformer layers end to end: LoD sequences of one
// length give the dense batch's result (with fused projections and rotary embedding too), a decoder layer never
// looks ahead nor across sequences, and a small decoder-only Transformer learns a task that needs attention
// back over ragged sequences.
#include "pch.hpp"
#include "support/op_check.hpp"

#include <random>

using namespace oar;
using oar::test::error_of;

namespace {

/// Dense [B, T, D] values laid out as LoD rows [B * T, D] (sequence b = rows b*T .. b*T + T - 1).
LoDTensor as_sequences(const Tensor& dense) {
  const int64_t B = dense.dim(0), T = dense.dim(1), D = dense.dim(2);
  std::vector<size_t> off;
  for (int64_t b = 0; b <= B; ++b) off.push_back(size_t(b * T));
  Tensor rows = dense.clone();
  rows.resize(Shape{B * T, D});
  return LoDTensor(rows, {off});
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  REQUIRE(a.numel() == b.numel());
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::abs(a.get(i) - b.get(i)));
  return m;
}

}  // namespace

TEST_CASE("multi_head_attention: LoD sequences of one length give the dense batch's output, with every option") {
  const int64_t B = 3, T = 5, D = 8;
  Tensor x = oar::test::random_tensor<float>({B, T, D}, -1, 1, 21);
  for (AttentionOptions o : {AttentionOptions{}, AttentionOptions{.causal = true}, AttentionOptions{.fused_qkv = true},
                             AttentionOptions{.causal = true, .rotary = true}}) {
    Tape dense_tape;
    auto xd = data("x", f32, {-1, T, D});
    auto yd = multi_head_attention(xd, 2, D, o);
    Model dense(dense_tape.program({yd}), 5);
    Tape lod_tape;
    auto xl = data("x", f32, {-1, D}).lod_level(1);
    auto yl = multi_head_attention(xl, 2, D, o);
    Model ragged(lod_tape.program({yl}), 5);
    // The same layers in the same order: the same parameters, drawn alike.
    auto pd = dense.persistables(), pl = ragged.persistables();
    REQUIRE(pd.size() == pl.size());
    REQUIRE(pd.size() == (o.fused_qkv ? 4u : 8u));  // weights and biases of the projections
    for (size_t i = 0; i < pd.size(); ++i) {
      CHECK(pd[i].first == pl[i].first);
      CHECK(max_abs_diff(pd[i].second, pl[i].second) == 0);
    }
    Evaluator ed(dense), el(ragged);
    Tensor a = ed.forward({{"x", LoDTensor(x)}})[0];
    LoDTensor b = el.forward({{"x", as_sequences(x)}})[0];
    CHECK(a.shape() == Shape{B, T, D});
    CHECK(b.shape() == Shape{B * T, D});
    CHECK(b.lod() == as_sequences(x).lod());
    CHECK_MESSAGE(max_abs_diff(a, b) < 1e-5, "causal " << o.causal << " fused " << o.fused_qkv << " rotary " << o.rotary);
  }
}

TEST_CASE("transformer_decoder_layer: a row never sees later rows of its sequence, nor other sequences") {
  const int64_t D = 8;
  Tape tape;
  auto x = data("x", f32, {-1, D}).lod_level(1);
  auto y = transformer_decoder_layer(transformer_decoder_layer(x, 2, {.rotary = true}), 2);
  Model model(tape.program({y}), 3);
  Evaluator ev(model);
  Tensor v = oar::test::random_tensor<float>({9, D}, -1, 1, 22);
  const LoD lod{{0, 4, 9}};
  Tensor base = ev.forward({{"x", LoDTensor(v, lod)}})[0];
  // Change row 2 (sequence 0) and row 8 (the last of sequence 1); not by a constant, which layer_norm removes.
  Tensor w = v.clone();
  for (int64_t e = 0; e < D; ++e) w.data<float>()[2 * D + e] += float(e % 3) - 1.f, w.data<float>()[8 * D + e] -= float(e % 2);
  Tensor changed = ev.forward({{"x", LoDTensor(w, lod)}})[0];
  auto row_diff = [&](int64_t r) {
    double m = 0;
    for (int64_t e = 0; e < D; ++e) m = std::max(m, std::abs(base.get(r * D + e) - changed.get(r * D + e)));
    return m;
  };
  CHECK(row_diff(0) == 0);
  CHECK(row_diff(1) == 0);
  CHECK(row_diff(2) > 1e-3);
  CHECK(row_diff(3) > 1e-3);  // sees row 2
  for (int64_t r = 4; r < 8; ++r) CHECK(row_diff(r) == 0);
  CHECK(row_diff(8) > 1e-3);
}

TEST_CASE("transformer: a decoder-only model learns to copy a ragged prefix (attention back k rows)") {
  // Each sequence is k random tokens, a separator, then the same k tokens again (k in 2..6): the second half is
  // predictable only by attending back k + 1 rows, different in each sequence.
  const int64_t V = 8, D = 32, sep = V - 1;
  Tape tape;
  auto tok = data("tok", i64, {-1, 1}).lod_level(1);
  auto next = data("next", i64, {-1, 1}).lod_level(1);
  Var h = add_position_encoding(embedding(tok, {V, D}), std::sqrt(double(D)), 1.0);
  for (int l = 0; l < 2; ++l) h = transformer_decoder_layer(h, 4, {.d_ff = 64});
  auto pred = fc(layer_norm(h), V).act(softmax);
  auto cost = mean(cross_entropy(pred, next));
  Model model(tape.program({cost, pred}), 11);
  Optimizer opt(model, cost, optim::adam(3e-3));
  std::mt19937 rng(5);
  auto batch = [&](int n, std::vector<int64_t>& copy_rows) {
    std::vector<int64_t> in, out;
    std::vector<size_t> off{0};
    copy_rows.clear();
    for (int s = 0; s < n; ++s) {
      const int k = 2 + int(rng() % 5);
      std::vector<int64_t> seq;
      for (int i = 0; i < k; ++i) seq.push_back(int64_t(rng() % (V - 1)));
      seq.push_back(sep);
      for (int i = 0; i < k; ++i) seq.push_back(seq[size_t(i)]);
      for (size_t i = 0; i + 1 < seq.size(); ++i) {
        if (i >= size_t(k)) copy_rows.push_back(int64_t(in.size()));  // predicting a copied token
        in.push_back(seq[i]);
        out.push_back(seq[i + 1]);
      }
      off.push_back(in.size());
    }
    const LoD lod{off};
    return FeedMap{{"tok", LoDTensor(Tensor::from<int64_t>(in, Shape{int64_t(in.size()), 1}), lod)},
                   {"next", LoDTensor(Tensor::from<int64_t>(out, Shape{int64_t(out.size()), 1}), lod)}};
  };
  std::vector<int64_t> rows;
  for (int step = 0; step < 400; ++step) opt.step(batch(16, rows));
  Evaluator ev(model);
  FeedMap test = batch(64, rows);
  Tensor p = ev.forward(test)[1];
  const Tensor& want = test.at("next");
  int64_t right = 0;
  for (int64_t r : rows) {
    int64_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (p.get(r * V + v) > p.get(r * V + best)) best = v;
    right += best == want.data<int64_t>()[r];
  }
  const double acc = double(right) / double(rows.size());
  MESSAGE("copied tokens predicted: " << acc);
  CHECK(acc > 0.9);  // chance is 1/7
}

TEST_CASE("multi_head_attention: heads that do not divide d_model, or a rank-4 x, are oar::Errors naming the call") {
  Tape tape;
  auto x = data("x", f32, {-1, 6}).lod_level(1);
  CHECK(error_of([&] { multi_head_attention(x, 4, 6); }).find("must split evenly into 4 heads") != std::string::npos);
  auto y = data("y", f32, {-1, 2, 3, 4});
  CHECK(error_of([&] { multi_head_attention(y, 2, 4); }).find("dense [B, T, d_model] or LoD [N, d_model]") != std::string::npos);
}

TEST_CASE("sample_token: greedy, top-k and temperature draw from what they should") {
  const std::vector<float> p{0.1f, 0.5f, 0.15f, 0.25f};
  std::mt19937_64 rng(3);
  CHECK(sample_token(std::span<const float>(p), {.temperature = 0}, rng) == 1);
  std::vector<int> seen(4, 0);
  for (int i = 0; i < 4000; ++i) ++seen[size_t(sample_token(std::span<const float>(p), {}, rng))];
  for (size_t i = 0; i < 4; ++i) CHECK(std::abs(seen[i] / 4000.0 - p[i]) < 0.03);  // about 4 standard deviations
  std::vector<int> top(4, 0);
  for (int i = 0; i < 2000; ++i) ++top[size_t(sample_token(std::span<const float>(p), {.top_k = 2}, rng))];
  CHECK(top[0] == 0);
  CHECK(top[2] == 0);
  CHECK(std::abs(top[1] / 2000.0 - 0.5 / 0.75) < 0.04);
  int cold = 0;  // temperature 0.1: p^10, so token 1 takes all but about 0.1% of the draws
  for (int i = 0; i < 1000; ++i) cold += sample_token(std::span<const float>(p), {.temperature = 0.1}, rng) == 1;
  CHECK(cold > 970);
  CHECK(error_of([&] { sample_token(std::span<const float>(p), {.temperature = -1}, rng); }).find("must be >= 0") != std::string::npos);
}

namespace {
/// A decoder-only model over token ids (LoD), its positions counted from each sequence's cached length.
struct Gpt {
  Tape tape;
  Var ids, logits;
  Gpt(bool rotary, bool cache) {
    const int64_t V = 11, D = 16;
    ids = data("ids", i64, {-1, 1}).lod_level(1);
    Var h = embedding(ids, {V, D});
    if (!rotary) h = cache ? add_position_encoding(h, 4.0, 1.0, cached_length(ids)) : add_position_encoding(h, 4.0, 1.0);
    for (int l = 0; l < 2; ++l) h = transformer_decoder_layer(h, 2, {.d_ff = 24, .rotary = rotary, .kv_cache = cache});
    logits = fc(layer_norm(h), V);
  }
};

/// Ids of `lengths.size()` sequences, taking rows [from[s], from[s] + n[s]) of each of `seqs`.
LoDTensor chunk(const std::vector<std::vector<int64_t>>& seqs, const std::vector<size_t>& from, const std::vector<size_t>& n) {
  std::vector<int64_t> v;
  std::vector<size_t> off{0};
  for (size_t s = 0; s < seqs.size(); ++s) {
    v.insert(v.end(), seqs[s].begin() + long(from[s]), seqs[s].begin() + long(from[s] + n[s]));
    off.push_back(v.size());
  }
  return LoDTensor(Tensor::from<int64_t>(v, Shape{int64_t(v.size()), 1}), {off});
}
}  // namespace

TEST_CASE("kv_cache: decoding a few tokens at a time gives the whole sequences' rows, sinusoids or rotary; reset starts over") {
  const std::vector<std::vector<int64_t>> seqs{{1, 4, 2, 9, 3, 3, 7}, {5, 0, 8, 6, 10}};
  // Chunks per call: sequence 0 takes 3, 1, 1, 2 rows; sequence 1 takes 1, 2, 0 (an empty sequence: waits), 2.
  const std::vector<std::vector<size_t>> plan{{3, 1}, {1, 2}, {1, 0}, {2, 2}};
  for (bool rotary : {false, true}) {
    CAPTURE(rotary);
    Gpt plain(rotary, false), cached(rotary, true);
    Model mp(plain.tape.program({plain.logits}), 9), mc(cached.tape.program({cached.logits}), 9);
    // Without a decoding Evaluator the cache is not there: the same model, the same rows.
    Evaluator whole(mp), whole_c(mc);
    const LoDTensor all = chunk(seqs, {0, 0}, {7, 5});
    const Tensor want = whole.forward({{"ids", all}})[0];
    CHECK(max_abs_diff(want, whole_c.forward({{"ids", all}})[0]) == 0);
    Evaluator dec(mc, {}, {.kv_cache = true});
    CHECK(dec.cached_lengths().empty());
    for (int round = 0; round < 2; ++round) {
      std::vector<size_t> at{0, 0};
      for (const auto& n : plan) {
        const Tensor got = dec.forward({{"ids", chunk(seqs, at, n)}})[0];
        int64_t row = 0;
        for (size_t s = 0; s < 2; ++s)
          for (size_t i = 0; i < n[s]; ++i, ++row) {
            const int64_t full_row = int64_t((s == 0 ? 0 : 7) + at[s] + i);
            double m = 0;
            for (int64_t v = 0; v < 11; ++v) m = std::max(m, std::abs(got.get(row * 11 + v) - want.get(full_row * 11 + v)));
            CHECK_MESSAGE(m < 2e-5, "sequence " << s << " row " << at[s] + i);
          }
        at[0] += n[0], at[1] += n[1];
      }
      CHECK(dec.cached_lengths() == std::vector<int64_t>{7, 5});
      // Three sequences cannot continue two.
      const std::string msg = error_of([&] { dec.forward({{"ids", chunk({{1}, {2}, {3}}, {0, 0, 0}, {1, 1, 1})}}); });
      CHECK(msg.find("the cache holds 2 sequences but X has 3") != std::string::npos);
      dec.reset_cache();
      CHECK(dec.cached_lengths().empty());
    }
  }
}

TEST_CASE("kv_cache: dense batches append along T; a model trains through the cache untouched") {
  const int64_t B = 2, T = 5, D = 8;
  Tape tape;
  auto x = data("x", f32, {-1, -1, D});
  Var h = add_position_encoding(x, 1.0, 1.0, cached_length(x));
  h = multi_head_attention(h, 2, D, {.causal = true, .rotary = true, .kv_cache = true});
  Model model(tape.program({h}), 4);
  Tensor v = oar::test::random_tensor<float>({B, T, D}, -1, 1, 31);
  Evaluator whole(model), dec(model, {}, {.kv_cache = true});
  const Tensor want = whole.forward({{"x", LoDTensor(v)}})[0];
  int64_t t0 = 0;
  for (int64_t n : {2, 1, 2}) {
    Tensor part(Shape{B, n, D}, DType::f32);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < n; ++t)
        for (int64_t e = 0; e < D; ++e) part.data<float>()[(b * n + t) * D + e] = v.data<float>()[(b * T + t0 + t) * D + e];
    const Tensor got = dec.forward({{"x", LoDTensor(part)}})[0];
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = 0; t < n; ++t)
        for (int64_t e = 0; e < D; ++e) CHECK(got.get((b * n + t) * D + e) == doctest::Approx(want.get((b * T + t0 + t) * D + e)).epsilon(1e-5));
    t0 += n;
  }
  CHECK(dec.cached_lengths() == std::vector<int64_t>{5, 5});

  // Training the cached layers is training the plain ones: the same losses step by step.
  auto train = [&](bool cache) {
    Tape t;
    auto xi = data("x", f32, {-1, T, D});
    auto y = data("y", f32, {-1, T, D});
    Var o = multi_head_attention(xi, 2, D, {.causal = true, .rotary = true, .kv_cache = cache});
    auto cost = mean(square_error_cost(o, y));
    Model m(t.program({cost}), 4);
    Optimizer opt(m, cost, optim::sgd(0.5));
    std::vector<double> losses;
    std::vector<LoDTensor> out;
    Tensor target = oar::test::random_tensor<float>({B, T, D}, -1, 1, 32);
    for (int s = 0; s < 3; ++s) {
      opt.step({{"x", LoDTensor(v)}, {"y", LoDTensor(target)}}, out);
      losses.push_back(out[0].get(0));
    }
    return losses;
  };
  const auto a = train(false), b = train(true);
  CHECK(a[2] < a[0]);
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == b[i]);
}

TEST_CASE("kv_cache: a decoding Evaluator refuses a model without a cache, and a position op without the cached offset") {
  Tape tape;
  auto ids = data("ids", i64, {-1, 1}).lod_level(1);
  Var e = embedding(ids, {5, 8});
  Var plain = transformer_decoder_layer(e, 2);
  Model m1(tape.program({plain}), 1);
  CHECK(error_of([&] { Evaluator ev(m1, {}, {.kv_cache = true}); }).find("has no key-value cache") != std::string::npos);
  Var p = add_position_encoding(e, 2.0, 1.0);  // the line the error names
  const int line = __LINE__ - 1;
  Var dec = transformer_decoder_layer(p, 2, {.kv_cache = true});
  Model m2(tape.program({dec}), 1);
  const std::string msg = error_of([&] { Evaluator ev(m2, {}, {.kv_cache = true}); });
  test::check_contains(msg, {"add_position_encoding numbers the positions of each run's tokens from 0", "cached_length",
                             "attention.cpp:" + std::to_string(line)});
  auto mem = data("mem", f32, {-1, 8}).lod_level(1);
  CHECK(error_of([&] { multi_head_attention(e, mem, 2, 8, {.kv_cache = true}); }).find("kv_cache is for self-attention") != std::string::npos);
}

TEST_CASE("scaled_dot_product_attention: .mask(m) is the fourth argument; a mask recorded later or twice is an oar::Error") {
  Tape tape;
  auto q = data("q", f32, {1, 2, 3, 4}), k = data("k", f32, {1, 2, 5, 4}), v = data("v", f32, {1, 2, 5, 4});
  auto m = data("m", f32, {3, 5});
  auto a = scaled_dot_product_attention(q, k, v, m);
  auto b = scaled_dot_product_attention(q, k, v).mask(m);
  auto u = scaled_dot_product_attention(q, k, v);
  Model model(tape.program({a, b, u}), 2);
  Evaluator ev(model);
  Tensor mv = oar::test::random_tensor<float>({3, 5}, -3, 1, 40);
  auto out = ev.forward({{"q", LoDTensor(oar::test::random_tensor<float>({1, 2, 3, 4}, -1, 1, 41))},
                         {"k", LoDTensor(oar::test::random_tensor<float>({1, 2, 5, 4}, -1, 1, 42))},
                         {"v", LoDTensor(oar::test::random_tensor<float>({1, 2, 5, 4}, -1, 1, 43))}, {"m", LoDTensor(mv)}});
  CHECK(max_abs_diff(out[0], out[1]) == 0);
  CHECK(max_abs_diff(out[0], out[2]) > 1e-3);  // the mask does something
  auto c = scaled_dot_product_attention(q, k, v);
  auto later = data("later", f32, {3, 5});
  CHECK(error_of([&] { c.mask(later); }).find("recorded before the layer") != std::string::npos);
  CHECK(error_of([&] { b.mask(m); }).find("mask is given twice") != std::string::npos);
}
