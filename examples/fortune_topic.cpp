// examples/fortune_topic.cpp: which fortune-cookie file a fortune comes from, from its words, over ragged
// batches (no padding anywhere). Ten files of distinct subjects from the Debian package `fortunes`; a
// recurrent model (embedding -> fc -> dynamic_lstm -> sequence_pool max -> fc softmax), a Transformer encoder
// (embedding + sinusoidal positions -> transformer_encoder_layer -> sequence_pool max -> fc softmax: attention
// within each fortune, nothing padded) and a bag of words (embedding -> sequence_pool average -> fc softmax),
// all trained here, and the majority-class rate. The last line is `lstm_accuracy=<value>`.
#include <oar/oar.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

const char* kDir = "/usr/share/games/fortunes/";
// Ten subjects as far apart as the package has them.
const std::vector<std::string> kTopics = {"computers", "science", "law", "medicine", "politics", "sports", "food", "love", "art", "literature"};

struct Fortune {
  std::vector<std::string> words;
  int64_t topic;
};

/// Lower-case runs of letters and digits (an apostrophe inside a word stays: "don't").
std::vector<std::string> tokenize(const std::string& text) {
  std::vector<std::string> out;
  std::string w;
  for (size_t i = 0; i <= text.size(); ++i) {
    const unsigned char ch = i < text.size() ? static_cast<unsigned char>(text[i]) : ' ';
    if (std::isalnum(ch) || (ch == '\'' && !w.empty())) w += char(std::tolower(ch));
    else if (!w.empty()) {
      while (!w.empty() && w.back() == '\'') w.pop_back();
      if (!w.empty()) out.push_back(w);
      w.clear();
    }
  }
  return out;
}

/// The fortunes of one file: texts separated by lines holding only "%".
std::vector<std::string> read_fortunes(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw oar::Error("cannot read " + path + " (install the Debian package `fortunes`)");
  std::vector<std::string> out;
  std::string line, cur;
  while (std::getline(in, line)) {
    if (line == "%") {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += line + '\n';
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

/// ids i64 [rows, 1] with one LoD level (a sequence per fortune) and labels i64 [n, 1].
std::vector<oar::LoDTensor> to_tensors(const std::vector<Fortune>& set, const std::map<std::string, int64_t>& vocab) {
  std::vector<int64_t> ids, labels;
  oar::Lengths lengths(1);
  for (const Fortune& f : set) {
    for (const std::string& w : f.words) {
      auto it = vocab.find(w);
      ids.push_back(it == vocab.end() ? 0 : it->second);  // 0: a word not seen twice in training
    }
    lengths[0].push_back(f.words.size());
    labels.push_back(f.topic);
  }
  auto n = int64_t(set.size());
  return {oar::LoDTensor::from_lengths(oar::Tensor::from<int64_t>(ids, {int64_t(ids.size()), 1}), lengths),
          oar::LoDTensor(oar::Tensor::from<int64_t>(labels, {n, 1}))};
}

struct Data {
  std::vector<oar::LoDTensor> train, valid;
  int64_t vocab = 0;
  double majority = 0;
};

Data load() {
  std::vector<Fortune> train, valid;
  std::mt19937_64 rng(7);
  for (size_t t = 0; t < kTopics.size(); ++t) {
    std::vector<std::string> texts = read_fortunes(kDir + kTopics[t]);
    std::shuffle(texts.begin(), texts.end(), rng);
    const size_t n_valid = texts.size() / 5;  // 20% of each file for validation
    for (size_t i = 0; i < texts.size(); ++i) {
      Fortune f{tokenize(texts[i]), int64_t(t)};
      if (f.words.empty()) continue;
      (i < n_valid ? valid : train).push_back(std::move(f));
    }
  }
  std::shuffle(train.begin(), train.end(), rng);
  std::map<std::string, int64_t> count, vocab;
  for (const Fortune& f : train)
    for (const std::string& w : f.words) ++count[w];
  for (auto& [w, c] : count)
    if (c >= 2) vocab.emplace(w, int64_t(vocab.size()) + 1);
  std::vector<int64_t> per_topic(kTopics.size());
  for (const Fortune& f : train) ++per_topic[size_t(f.topic)];
  const int64_t majority = std::max_element(per_topic.begin(), per_topic.end()) - per_topic.begin();
  Data d;
  d.vocab = int64_t(vocab.size()) + 1;
  d.majority = double(std::count_if(valid.begin(), valid.end(), [&](const Fortune& f) { return f.topic == majority; })) / double(valid.size());
  d.train = to_tensors(train, vocab);
  d.valid = to_tensors(valid, vocab);
  std::printf("%zu training and %zu validation fortunes, %lld words in the vocabulary\n", train.size(), valid.size(), (long long)d.vocab);
  return d;
}

enum class Kind { bag_of_words, lstm, transformer };

/// Trains one model and returns its validation accuracy after the last epoch.
double train(const Data& d, Kind kind, int epochs) {
  oar::Tape tape;
  auto ids = oar::data("ids", oar::i64, {-1, 1}).lod_level(1);
  auto label = oar::data("label", oar::i64, {-1, 1});
  auto emb = oar::embedding(ids, {d.vocab, 64});  // [words, 64], the fortunes' LoD
  oar::Var pooled;
  if (kind == Kind::bag_of_words) {
    pooled = oar::sequence_pool(emb, oar::SequencePoolType::average);
  } else if (kind == Kind::transformer) {
    auto h = oar::transformer_encoder_layer(oar::add_position_encoding(emb, 8.0), 4, {.d_ff = 128, .dropout = 0.1});  // [words, 64]
    pooled = oar::sequence_pool(h, oar::SequencePoolType::max);
  } else {
    const int64_t hidden = 64;
    auto h = oar::dynamic_lstm(oar::fc(emb, 4 * hidden), 4 * hidden);  // [words, hidden]
    pooled = oar::sequence_pool(h, oar::SequencePoolType::max);         // [fortunes, hidden]
  }
  auto prediction = oar::fc(pooled, int64_t(kTopics.size())).act(oar::softmax);
  auto cost = oar::mean(oar::cross_entropy(prediction, label));
  auto acc = oar::accuracy(prediction, label);

  oar::Model model(tape.program({cost, acc}));
  const int64_t batch = 32, steps = epochs * ((d.train[1].dim(0) + batch - 1) / batch);
  auto rule = oar::optim::adam(3e-3).with_schedule(oar::optim::cosine_decay(steps));
  // The LSTM fits the 3108 training fortunes exactly within five epochs; without weight decay its validation
  // accuracy then drifts by +-0.02 with the rounding of the run (a different GEMM path is enough).
  if (kind != Kind::bag_of_words) rule.with_regularization(oar::L2Decay(2e-4));
  oar::Optimizer opt(model, cost, rule);
  auto reader = oar::io::Reader::from_tensors(d.train).shuffle(4096, 1).batch(batch);
  oar::Evaluator tester(model);
  const char* name = kind == Kind::lstm ? "lstm" : kind == Kind::transformer ? "transformer" : "bag of words";
  double accuracy = 0;
  opt.train(reader, {ids, label}, epochs, [&](const oar::Event& e) {
    if (e.kind != oar::Event::Kind::end_pass) return;
    auto m = tester.test(oar::io::Reader::from_tensors(d.valid).batch(256), nullptr, std::string(), {"ids", "label"});
    accuracy = m.at(model.name_of(acc));
    std::printf("%s, epoch %lld: train loss %.4f, validation accuracy %.4f (%.1fs)\n", name, (long long)e.pass + 1, e.loss, accuracy, e.seconds);
    std::fflush(stdout);
  });
  return accuracy;
}

}  // namespace

int main() try {
  Data d = load();
  const double bow = train(d, Kind::bag_of_words, 12);
  const double transformer = train(d, Kind::transformer, 12);
  const double lstm = train(d, Kind::lstm, 12);
  std::printf("majority_class=%.4f\nbag_of_words_accuracy=%.4f\ntransformer_accuracy=%.4f\n", d.majority, bow, transformer);
  std::printf("lstm_accuracy=%.4f\n", lstm);
  return lstm >= bow - 0.02 && lstm > d.majority + 0.2 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
