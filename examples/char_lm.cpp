// examples/char_lm.cpp: a character-level language model on the fortune-cookie texts of the Debian package
// `fortunes`: embedding 64 -> fc 4*256 -> dynamic_lstm (256 units, no peepholes) -> fc softmax over the
// characters, trained on one core to predict each next character of random 100-character chunks, fed as LoD
// sequences. Whole files are held out for validation (science, wisdom, sports, food: 10% of the text).
// Usage: char_lm [--steps N] [--lr LR] [--device cuda]. The last line is `validation_bits_per_char=<value>`; exits
// non-zero above 2.3. `--device cuda` (or cuda:N) trains on a GPU (docs/cuda.md); the default is the CPU.
#include <oar/oar.hpp>

#include "fortunes.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace fortunes;

namespace {

constexpr int64_t kEmbed = 64, kHidden = 256;
constexpr double kTarget = 2.3;  // bits per character

}  // namespace

int main(int argc, char** argv) try {
  // 4000 steps (12.8M characters, about 5.6 passes over the training text) take about 6 minutes of CPU time
  // on one Zen 5 core, leaving room under the 10-minute budget on a slower or busier core. Adam's 1e-2 is the
  // best of 2e-3, 5e-3, 1e-2 and 2e-2 after 500 steps (3.17, 2.95, 2.63, 2.91 validation bits/char).
  int64_t steps = 4000;
  double lr = 1e-2;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) steps = std::atoll(argv[++i]);
    else if (std::strcmp(argv[i], "--lr") == 0 && i + 1 < argc) lr = std::atof(argv[++i]);
    else if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) ++i;  // read by place_from_args
    else if (std::strncmp(argv[i], "--device=", 9) == 0) continue;
    else {
      std::printf("usage: char_lm [--steps N (4000)] [--lr LR (1e-2)] [--device cpu|cuda|cuda:N]\n");
      return 2;
    }
  }
  const oar::Place place = oar::place_from_args(argc, argv);
  oar::set_num_threads(1);
  const Corpus corpus = load();

  oar::Tape tape;
  auto ids = oar::data("ids", oar::i64, {-1, 1}).lod_level(1);
  auto next = oar::data("next", oar::i64, {-1, 1});
  auto emb = oar::embedding(ids, {kVocab, kEmbed});
  auto h = oar::dynamic_lstm(oar::fc(emb, 4 * kHidden), 4 * kHidden).use_peepholes(false);  // [rows, 256]
  auto nats = oar::softmax_with_cross_entropy(oar::fc(h, kVocab), next);                   // [rows, 1]
  auto cost = oar::mean(nats);

  oar::Model model(tape.program(cost), place);
  oar::Model scorer(tape.program(nats), place);  // the same parameters, per-character losses out
  // Adam decaying along a cosine to 0, the gradient clipped to a global norm of 5 (the usual guard of a
  // recurrent net against a sudden large gradient).
  auto rule = oar::optim::adam(lr).with_schedule(oar::optim::cosine_decay(double(steps))).with_clip(oar::ClipByGlobalNorm(5));
  oar::Optimizer opt(model, cost, rule);
  oar::Evaluator ev(scorer);

  // Validation: the held-out text cut into consecutive chunks, each from a zero state, every character scored once.
  auto validate = [&] { return fortunes::validate(ev, model.name_of(ids), model.name_of(next), corpus.valid); };

  std::mt19937_64 rng(11);
  std::uniform_int_distribution<size_t> pick(0, corpus.train.size() - kChunk - 2);
  std::vector<size_t> starts(kBatch);
  std::vector<oar::LoDTensor> out;
  double loss_avg = 0, train_cpu = 0, bpc = 0;
  const double t0 = cpu_seconds();
  for (int64_t step = 0; step < steps; ++step) {
    for (auto& s : starts) s = pick(rng);
    auto [x, y] = make_batch(corpus.train, starts);
    const double t = cpu_seconds();
    opt.step({{model.name_of(ids), x}, {model.name_of(next), y}}, out);
    train_cpu += cpu_seconds() - t;
    const double loss = double(out[0].get(0));
    loss_avg = step == 0 ? loss : 0.98 * loss_avg + 0.02 * loss;
    if ((step + 1) % 100 == 0 || step + 1 == steps) {
      std::printf("step %lld: train %.3f bits/char, %.0f chars/s, %.0f s CPU\n", (long long)step + 1, loss_avg / std::log(2.0),
                  double((step + 1) * kBatch * kChunk) / train_cpu, cpu_seconds() - t0);
      std::fflush(stdout);
    }
    if ((step + 1) % 1000 == 0 || step + 1 == steps) {
      bpc = validate();
      std::printf("step %lld: validation %.4f bits/char\n", (long long)step + 1, bpc);
      std::fflush(stdout);
    }
  }
  std::printf("training: %lld steps of %lld chunks x %lld characters, %.1f s CPU in Optimizer::step, %.1f s CPU in all\n", (long long)steps,
              (long long)kBatch, (long long)kChunk, train_cpu, cpu_seconds() - t0);
  std::printf("validation_bits_per_char=%.4f\n", bpc);
  return bpc <= kTarget ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
