// bench/fortunes.hpp: the text of the char_lm group, read as examples/char_lm.cpp reads it: the fortune files of
// the Debian package `fortunes` as character ids, whole files held out for validation (science, wisdom, sports,
// food). Plain C++, so that the oar and LibTorch sides get the very same ids.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench::fortunes {

inline const char* kDir = "/usr/share/games/fortunes/";
/// Ids: 0 for any other byte, 1 newline, 2 tab, 3.. the printable ASCII.
inline constexpr int64_t kVocab = 3 + 95;

inline int64_t char_id(unsigned char c) {
  if (c == '\n') return 1;
  if (c == '\t') return 2;
  if (c >= 32 && c < 127) return 3 + (c - 32);
  return 0;
}

struct Corpus {
  std::vector<int64_t> train, valid;  ///< character ids, the files one after the other in name order
};

/// Each file's fortunes (texts between lines holding only "%"), each followed by an empty line. Throws when
/// the package is missing.
inline Corpus load() {
  const std::set<std::string> valid_files = {"science", "wisdom", "sports", "food"};
  std::set<std::filesystem::path> files;  // the plain-text files: no extension (.dat is an index, .u8 a UTF-8 copy)
  if (std::filesystem::is_directory(kDir))
    for (const auto& e : std::filesystem::directory_iterator(kDir))
      if (e.is_regular_file() && !e.path().has_extension()) files.insert(e.path());
  if (files.empty()) throw std::runtime_error(std::string("no fortune files in ") + kDir + " (install the Debian package `fortunes`)");
  Corpus c;
  for (const auto& f : files) {
    auto& dst = valid_files.count(f.filename().string()) ? c.valid : c.train;
    std::ifstream in(f, std::ios::binary);
    std::string line;
    while (std::getline(in, line)) {
      if (line != "%")
        for (char ch : line) dst.push_back(char_id(static_cast<unsigned char>(ch)));
      dst.push_back(char_id('\n'));
    }
  }
  return c;
}

}  // namespace bench::fortunes
