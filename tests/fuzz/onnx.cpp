// tests/fuzz/onnx.cpp: the ONNX importer, on the bytes of a model file. Every refusal is an oar::Error
// (UnsupportedError is one); a model it accepts must also survive shape inference of its program.
#include <oar/onnx/onnx.hpp>

#include "tests/fuzz/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return oar::fuzz::guarded([&] { (void)oar::onnx::import_model_bytes(std::string(oar::fuzz::bytes(data, size)), oar::cpu(), {}, "fuzz.onnx"); });
}
