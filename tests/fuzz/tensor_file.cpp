// tests/fuzz/tensor_file.cpp: Fluid's LoDTensor stream, as in a tensor file or a combined `__params__` file:
// tensors read one after the other until the bytes run out.
#include "oar/io/tensor_file.hpp"
#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return oar::fuzz::guarded([&] {
    std::string_view in = oar::fuzz::bytes(data, size);
    for (int i = 0; !in.empty() && i < 64; ++i) {
      oar::LoDTensor t = oar::io::read_lod_tensor(in, "fuzz input");
      if (t.numel() > 0 && t.raw() == nullptr) std::abort();  // a tensor that claims elements holds them
    }
  });
}
