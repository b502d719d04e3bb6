// tests/fuzz/checkpoint.cpp: the checkpoint reader. Its last 8 bytes are an FNV-1a checksum of the rest, which
// almost every mutation breaks; the target writes the right checksum over them (when the input is long enough)
// so that the sections behind it are what gets fuzzed. Inputs of odd length keep their own checksum, so the
// check itself is fuzzed too.
#include <string>

#include "oar/io/checkpoint.hpp"
#include "tests/fuzz/file_input.hpp"
#include "tests/fuzz/fuzz.hpp"

namespace {
uint64_t fnv1a(std::string_view s) {  // the checkpoint's checksum, as its format defines it
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string in(oar::fuzz::bytes(data, size));
  if (in.size() >= 16 && in.size() % 2 == 0) {
    const uint64_t h = fnv1a(std::string_view(in).substr(0, in.size() - 8));
    for (int i = 0; i < 8; ++i) in[in.size() - 8 + size_t(i)] = char((h >> (8 * i)) & 0xff);
  }
  const auto path = oar::fuzz::input_file(in, "fuzz.ckpt");
  return oar::fuzz::guarded([&] { (void)oar::io::load_checkpoint(path); });
}
