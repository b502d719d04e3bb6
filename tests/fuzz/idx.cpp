// tests/fuzz/idx.cpp: the IDX reader (MNIST's format), plain or gzipped (zlib reads both).
#include "oar/io/idx.hpp"
#include "tests/fuzz/file_input.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = oar::fuzz::input_file(oar::fuzz::bytes(data, size), "fuzz.idx");
  return oar::fuzz::guarded([&] {
    oar::io::IdxData d = oar::io::read_idx(path);
    if (int64_t(d.data.size()) != d.numel()) std::abort();  // what it returns holds what its dims say
  });
}
