// examples/fortunes.hpp: the text the character-level examples (char_lm, fortune_gpt) train on: the fortune
// files of the Debian package `fortunes` as character ids, whole files held out for validation, cut into
// chunks fed as LoD sequences.
#pragma once
#include <oar/oar.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <functional>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace fortunes {

/// The Debian package's fortune files, or a copy named by $OAR_FORTUNES_DIR (a machine without the package).
inline std::string fortunes_dir() {
  const char* env = std::getenv("OAR_FORTUNES_DIR");
  return env && *env ? std::string(env) + "/" : std::string("/usr/share/games/fortunes/");
}
// Held out whole, so validation text comes from subjects the model never trained on.
inline const std::set<std::string> kValidFiles = {"science", "wisdom", "sports", "food"};

// Ids: 0 for any other byte (a few Latin-1 and control bytes), 1 newline, 2 tab, 3.. the printable ASCII.
constexpr int64_t kVocab = 3 + 95;
constexpr int64_t kChunk = 100, kBatch = 32;

inline int64_t char_id(unsigned char c) {
  if (c == '\n') return 1;
  if (c == '\t') return 2;
  if (c >= 32 && c < 127) return 3 + (c - 32);
  return 0;
}
/// The character of an id ('?' for id 0).
inline char id_char(int64_t id) { return id == 1 ? '\n' : id == 2 ? '\t' : id >= 3 && id < kVocab ? char(32 + id - 3) : '?'; }

/// The fortunes of one file (texts between lines holding only "%"), each followed by an empty line.
inline std::string read_fortunes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw oar::Error("cannot read " + path.string() + " (install the Debian package `fortunes`)");
  std::string out, line;
  while (std::getline(in, line)) out += line == "%" ? "\n" : line + '\n';
  return out;
}

struct Corpus {
  std::vector<int64_t> train, valid;  // character ids, the files one after the other
};

inline Corpus load() {
  // The plain-text files are those without an extension (.dat is fortune's index, .u8 a UTF-8 copy).
  const std::string dir = fortunes_dir();
  std::set<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file() && !e.path().has_extension()) files.insert(e.path());
  if (files.empty()) throw oar::Error("no fortune files in " + dir + " (install the Debian package `fortunes`)");
  Corpus c;
  for (const auto& f : files) {
    auto& dst = kValidFiles.count(f.filename().string()) ? c.valid : c.train;
    for (char ch : read_fortunes(f)) dst.push_back(char_id(static_cast<unsigned char>(ch)));
  }
  std::printf("%zu files: %zu training characters, %zu validation characters (%s)\n", files.size(), c.train.size(), c.valid.size(),
              "science, wisdom, sports, food");
  return c;
}

/// Chunks starting at `starts`: ids text[s .. s + kChunk) as sequences of one LoD level, and the next
/// characters text[s + 1 .. s + kChunk + 1) as labels; a chunk may be cut short by the end of the text.
inline std::pair<oar::LoDTensor, oar::LoDTensor> make_batch(const std::vector<int64_t>& text, const std::vector<size_t>& starts) {
  std::vector<int64_t> ids, next;
  oar::Lengths lengths(1);
  for (size_t s : starts) {
    const size_t n = std::min<size_t>(kChunk, text.size() - 1 - s);
    ids.insert(ids.end(), text.begin() + long(s), text.begin() + long(s + n));
    next.insert(next.end(), text.begin() + long(s + 1), text.begin() + long(s + 1 + n));
    lengths[0].push_back(n);
  }
  const auto rows = int64_t(ids.size());
  return {oar::LoDTensor::from_lengths(oar::Tensor::from<int64_t>(ids, {rows, 1}), lengths),
          oar::LoDTensor(oar::Tensor::from<int64_t>(next, {rows, 1}))};
}

/// Mean bits per character of the held-out text, cut into consecutive chunks (each from a fresh start) and
/// scored by `ev`, whose first output is the per-character loss in nats.
/// `more(x, feeds)` may add feeds computed from the ids (fortune_gpt's previous characters).
inline double validate(oar::Evaluator& ev, const std::string& ids, const std::string& next, const std::vector<int64_t>& valid,
                       const std::function<void(const oar::LoDTensor&, oar::FeedMap&)>& more = {}) {
  double nats_sum = 0;
  int64_t count = 0;
  std::vector<size_t> starts;
  for (size_t s = 0; s + 1 < valid.size(); s += kChunk) starts.push_back(s);
  for (size_t b = 0; b < starts.size(); b += 128) {
    std::vector<size_t> part(starts.begin() + long(b), starts.begin() + long(std::min(b + 128, starts.size())));
    auto [x, y] = make_batch(valid, part);
    oar::FeedMap feeds{{ids, x}, {next, y}};
    if (more) more(x, feeds);
    auto out = ev.forward(feeds);
    for (float v : out[0].span<float>()) nats_sum += v;
    count += out[0].dim(0);
  }
  return nats_sum / double(count) / std::log(2.0);
}

inline double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace fortunes
