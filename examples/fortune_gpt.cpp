// examples/fortune_gpt.cpp: a small decoder-only Transformer (GPT's layout) as a character-level language model
// on the fortune-cookie texts of the Debian package `fortunes`, the text char_lm's LSTM learns: the character's
// embedding plus those of the two characters before it (within its chunk: n-gram features from the first step)
// -> pre-norm decoder layers (causal self-attention with rotary positions, 4 heads, gelu feed-forward) ->
// layer_norm -> fc softmax over the characters. The 100-character chunks are fed as LoD sequences, so causal
// attention runs within each chunk with nothing padded. Whole files are held out for validation (science,
// wisdom, sports, food), as char_lm holds them out, and a fortune sampled from the model ends the run.
// Usage: fortune_gpt [--steps N] [--lr LR] [--warmup W] [--seconds S] [--layers L] [--width D] [--ff F]
// [--heads H] [--prev N] [--batch B] [--clip C] [--rotary | --sinusoid] [--relu] [--profile]: --seconds stops
// training at S seconds of CPU time (to compare with char_lm at equal time); --profile prints the training
// steps' time per op (oar::Profiler) to stderr. The last line is `validation_bits_per_char=<value>`.
#include <oar/oar.hpp>

#include "fortunes.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

using namespace fortunes;

namespace {
constexpr int64_t kNone = kVocab;  // the id of "no character": before a chunk's first

/// For ids x (chunks as one LoD level) and k >= 1: the id k rows back within the same chunk, kNone before its start.
oar::LoDTensor ids_back(const oar::LoDTensor& x, int64_t k) {
  const auto& off = x.lod().at(0);
  const auto v = x.span<int64_t>();
  std::vector<int64_t> out(v.size(), kNone);
  for (size_t s = 0; s + 1 < off.size(); ++s)
    for (size_t r = off[s] + size_t(k); r < off[s + 1]; ++r) out[r] = v[r - size_t(k)];
  return oar::LoDTensor(oar::Tensor::from<int64_t>(out, {int64_t(out.size()), 1}), x.lod());
}
}  // namespace

int main(int argc, char** argv) try {
  // The defaults are the best found at char_lm's training time on one core (docs/attention.md).
  int64_t steps = 3100, layers = 2, width = 64, ff = 256, batch = 20, heads = 4, prev = 2;
  double lr = 1.5e-2, seconds = 0, warmup = 250;
  double clip = 1;
  bool rotary = true, profile = false, relu = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) steps = std::atoll(argv[++i]);
    else if (std::strcmp(argv[i], "--lr") == 0 && i + 1 < argc) lr = std::atof(argv[++i]);
    else if (std::strcmp(argv[i], "--batch") == 0 && i + 1 < argc) batch = std::atoll(argv[++i]);
    else if (std::strcmp(argv[i], "--warmup") == 0 && i + 1 < argc) warmup = std::atof(argv[++i]);
    else if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (std::strcmp(argv[i], "--layers") == 0 && i + 1 < argc) layers = std::atoll(argv[++i]);
    else if (std::strcmp(argv[i], "--width") == 0 && i + 1 < argc) width = std::atoll(argv[++i]);
    else if (std::strcmp(argv[i], "--ff") == 0 && i + 1 < argc) ff = std::atoll(argv[++i]);
    else if (std::strcmp(argv[i], "--heads") == 0 && i + 1 < argc) heads = std::atoll(argv[++i]);
    else if (std::strcmp(argv[i], "--prev") == 0 && i + 1 < argc) prev = std::atoll(argv[++i]);
    else if (std::strcmp(argv[i], "--clip") == 0 && i + 1 < argc) clip = std::atof(argv[++i]);
    else if (std::strcmp(argv[i], "--rotary") == 0) rotary = true;
    else if (std::strcmp(argv[i], "--sinusoid") == 0) rotary = false;
    else if (std::strcmp(argv[i], "--relu") == 0) relu = true;
    else if (std::strcmp(argv[i], "--profile") == 0) profile = true;
    else {
      std::printf("usage: fortune_gpt [--steps N (3100)] [--lr LR (1.5e-2)] [--warmup W (250)] [--seconds S (no limit)] [--layers L (2)] [--width D (64)] [--ff F (256)] [--heads H (4)] [--prev N (2)] [--batch B (20)] [--clip C (1)] [--rotary (the default) | --sinusoid] [--relu] [--profile]\n");
      return 2;
    }
  }
  oar::set_num_threads(1);  // one core, as char_lm trains
  const Corpus corpus = load();

  oar::Tape tape;
  auto ids = oar::data("ids", oar::i64, {-1, 1}).lod_level(1);
  auto next = oar::data("next", oar::i64, {-1, 1});
  // Positions: rotary embedding of queries and keys in every layer, or sinusoids added to the embeddings
  // (scaled by sqrt(width) so that the sinusoids, of size 1, do not drown them).
  // The self-attention keeps a key-value cache for sampling (kv_cache: in training it passes its rows through),
  // so the sinusoids count from each sequence's cached length too.
  oar::Var h = oar::embedding(ids, {kVocab, width});
  // --prev N: the N characters before each one (within its chunk; kNone before the chunk's first) as embeddings
  // of their own, added to the character's: n-gram features from the first step, before attention learns them.
  std::vector<oar::Var> prevs;
  for (int64_t k = 1; k <= prev; ++k) {
    prevs.push_back(oar::data("prev" + std::to_string(k), oar::i64, {-1, 1}).lod_level(1));
    h = oar::elementwise_add(h, oar::embedding(prevs.back(), {kVocab + 1, width}));
  }
  if (!rotary) h = oar::add_position_encoding(h, std::sqrt(double(width)), 1.0, oar::cached_length(ids));
  for (int64_t l = 0; l < layers; ++l) h = oar::transformer_decoder_layer(h, heads, {.d_ff = ff, .rotary = rotary, .relu = relu, .kv_cache = true});
  auto logits = oar::fc(oar::layer_norm(h), kVocab);
  auto probs = oar::softmax(logits);  // for sampling: recorded before the loss, so its program needs no labels
  auto nats = oar::softmax_with_cross_entropy(logits, next);  // [rows, 1]
  auto cost = oar::mean(nats);
  // Training and scoring leave the sampling softmax out (replay keeps every layer recorded before an output).
  oar::Model model(tape.program(cost, oar::skip(probs)));
  oar::Model scorer(tape.program(nats, oar::skip(probs)));  // the same parameters, per-character losses out
  // Adam rising linearly over --warmup steps, then decaying along a cosine to 0; the gradient clipped to a global norm of --clip (1).
  auto rule = oar::optim::adam(lr).with_schedule(oar::optim::cosine_decay(double(steps), warmup)).with_clip(oar::ClipByGlobalNorm(clip));
  oar::Optimizer opt(model, cost, rule);
  oar::Evaluator ev(scorer);
  // The previous characters' feeds of a model, from its ids.
  auto add_prevs = [&](const oar::Model& m, const oar::LoDTensor& x, oar::FeedMap& feeds) {
    for (int64_t k = 1; k <= prev; ++k) feeds[m.name_of(prevs[size_t(k - 1)])] = ids_back(x, k);
  };

  std::mt19937_64 rng(11);
  std::uniform_int_distribution<size_t> pick(0, corpus.train.size() - kChunk - 2);
  std::vector<size_t> starts(static_cast<size_t>(batch));
  std::vector<oar::LoDTensor> out;
  double loss_avg = 0, train_cpu = 0, bpc = 0;
  const double t0 = cpu_seconds();
  int64_t done = 0;
  std::optional<oar::Profiler> prof;
  if (profile) prof.emplace();
  for (int64_t step = 0; step < steps; ++step) {
    for (auto& s : starts) s = pick(rng);
    auto [x, y] = make_batch(corpus.train, starts);
    const double t = cpu_seconds();
    oar::FeedMap feeds{{model.name_of(ids), x}, {model.name_of(next), y}};
    add_prevs(model, x, feeds);
    opt.step(feeds, out);
    train_cpu += cpu_seconds() - t;
    done = step + 1;
    const double loss = double(out[0].get(0));
    loss_avg = step == 0 ? loss : 0.98 * loss_avg + 0.02 * loss;
    const bool last = step + 1 == steps || (seconds > 0 && train_cpu >= seconds);
    if ((step + 1) % 100 == 0 || last) {
      std::printf("step %lld: train %.3f bits/char, %.0f chars/s, %.0f s CPU\n", (long long)step + 1, loss_avg / std::log(2.0),
                  double((step + 1) * batch * kChunk) / train_cpu, cpu_seconds() - t0);
      std::fflush(stdout);
    }
    if ((step + 1) % 1000 == 0 || last) {
      bpc = validate(ev, scorer.name_of(ids), scorer.name_of(next), corpus.valid,
                     [&](const oar::LoDTensor& vx, oar::FeedMap& f) { add_prevs(scorer, vx, f); });
      std::printf("step %lld: validation %.4f bits/char\n", (long long)step + 1, bpc);
      std::fflush(stdout);
    }
    if (last) break;
  }
  if (prof) {
    std::fprintf(stderr, "%s", prof->report().c_str());
    prof.reset();
  }
  std::printf("training: %lld steps of %lld chunks x %lld characters, %.1f s CPU in Optimizer::step, %.1f s CPU in all\n", (long long)done,
              (long long)batch, (long long)kChunk, train_cpu, cpu_seconds() - t0);

  // A fortune, one character at a time (temperature 0.8, the 20 likeliest characters), after an empty line. The
  // decoding Evaluator keeps each layer's keys and values, so each character costs one row's work against the
  // cache; the model was trained on 100-character chunks, so when the cache holds 100 the last 50 characters
  // start it again. For comparison, the same number of characters sampled by running the last 100 characters
  // again for each one (what a model without the cache must do).
  oar::Model sampler(tape.program({probs}));  // the same tape: the trained parameters
  auto one_sequence = [&](std::span<const int64_t> v) {
    const auto n = int64_t(v.size());
    oar::Lengths len(1);
    len[0].push_back(size_t(n));
    return oar::LoDTensor::from_lengths(oar::Tensor::from<int64_t>(v, {n, 1}), len);
  };
  std::string text;
  std::vector<int64_t> context{1};
  // The sampler's feeds for the characters v = context[at ..], in a chunk that began at context[begin].
  auto sample_feeds = [&](std::span<const int64_t> v, size_t at, size_t begin) {
    oar::FeedMap f{{sampler.name_of(ids), one_sequence(v)}};
    for (int64_t k = 1; k <= prev; ++k) {
      std::vector<int64_t> back(v.size());
      for (size_t t = 0; t < v.size(); ++t) back[t] = at + t >= begin + size_t(k) ? context[at + t - size_t(k)] : kNone;
      f[sampler.name_of(prevs[size_t(k - 1)])] = one_sequence(back);
    }
    return f;
  };
  std::mt19937_64 draw(2026);
  double cached_s = 0;
  {
    oar::Evaluator gen(sampler, {}, {.kv_cache = true});
    std::span<const int64_t> feed(context);
    size_t begin = 0;  // where the cached chunk began in context
    const double t = cpu_seconds();
    while (text.size() < 400 && !(text.size() >= 2 && text.compare(text.size() - 2, 2, "\n\n") == 0)) {
      if (!gen.cached_lengths().empty() && gen.cached_lengths()[0] + int64_t(feed.size()) > kChunk) {
        gen.reset_cache();
        feed = std::span<const int64_t>(context).last(std::min<size_t>(context.size(), size_t(kChunk / 2)));
        begin = context.size() - feed.size();
      }
      auto p = gen.forward(sample_feeds(feed, size_t(feed.data() - context.data()), begin))[0];
      const std::span<const float> last = p.span<float>().last(size_t(kVocab));
      const int64_t c = oar::sample_token(last, {.temperature = 0.8, .top_k = 20}, draw);
      context.push_back(c);
      text += id_char(c);
      feed = std::span<const int64_t>(context).last(1);
    }
    cached_s = cpu_seconds() - t;
  }
  double rerun_s = 0;
  {
    oar::Evaluator gen(sampler);
    const double t = cpu_seconds();
    for (size_t i = 1; i < context.size(); ++i) {
      const size_t from = i > size_t(kChunk) ? i - size_t(kChunk) : 0;
      gen.forward(sample_feeds(std::span<const int64_t>(context).subspan(from, i - from), from, from));
    }
    rerun_s = cpu_seconds() - t;
  }
  std::printf("sampling %zu characters: %.0f characters/s with the key-value cache, %.0f rerunning up to 100 characters for each\n", text.size(),
              double(text.size()) / cached_s, double(text.size()) / rerun_s);
  std::printf("a sampled fortune:\n%s%s", text.c_str(), text.ends_with('\n') ? "" : "\n");
  std::printf("validation_bits_per_char=%.4f\n", bpc);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
