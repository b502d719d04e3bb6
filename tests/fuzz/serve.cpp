// tests/fuzz/serve.cpp: the inference server's request parser (KServe v2: JSON, and JSON followed by binary
// tensor data). The first byte says (bit 0) whether the request has an Inference-Header-Content-Length header,
// the next two its value (little-endian: where the JSON ends and binary data begins); the rest is the body. A bad request must be a RequestError (an HTTP
// 4xx) or an oar::Error.
#include <oar/oar.hpp>

#include <memory>

#include "src/serve/metrics.hpp"
#include "src/serve/model_store.hpp"
#include "src/serve/protocol.hpp"
#include "tests/fuzz/fuzz.hpp"

namespace {

/// A small MLP with a batch input, saved once and served as model "m".
const oar::serve::ModelVersion& model() {
  static oar::serve::ModelMetrics metrics;
  static std::unique_ptr<oar::serve::ModelVersion> m = [] {
    const auto dir = std::filesystem::temp_directory_path() / ("oar-fuzz-serve-" + std::to_string(::getpid()));
    oar::Tape tape;
    auto x = oar::data("x", oar::f32, {-1, 4});
    auto y = oar::fc(x, 3).act(oar::softmax).name("y");
    oar::Model net(tape.program(y), 1);
    net.save_inference(dir, {x}, {y});
    std::atexit([] {  // the model's files go with the process (the model stays loaded until then)
      std::error_code ec;
      std::filesystem::remove_all(std::filesystem::temp_directory_path() / ("oar-fuzz-serve-" + std::to_string(::getpid())), ec);
    });
    return std::make_unique<oar::serve::ModelVersion>("m", 1, dir, oar::serve::ModelConfig{}, metrics);
  }();
  return *m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const std::string_view body = oar::fuzz::bytes(data + 3, size - 3);
  std::optional<size_t> json_bytes;
  if (data[0] & 1) json_bytes = size_t(data[1]) | size_t(data[2]) << 8;
  oar::serve::Limits limits;
  limits.max_elements = 1 << 16;
  try {
    (void)oar::serve::parse_infer(model(), body, json_bytes, limits);
  } catch (const oar::serve::RequestError& e) {
    if (e.status() < 400 || e.status() >= 500) std::abort();  // the client's fault, said as such
  } catch (const oar::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: an exception that is neither a RequestError nor an oar::Error: %s\n", e.what());
    std::abort();
  }
  return 0;
}
