// src/serve/protocol.hpp: the KServe v2 inference protocol's messages (JSON, and the binary tensor data
// extension that Triton's clients use by default), turned into tensors and back. No sockets here.
#pragma once
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "oar/core/dtype.hpp"
#include "oar/device/tensor.hpp"
#include "oar/serve/server.hpp"
#include "src/serve/model_store.hpp"

namespace oar::serve {

/// A request the server refuses, with the HTTP status to answer.
class RequestError : public std::runtime_error {
 public:
  RequestError(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

/// The protocol's datatype names ("FP32", "INT64", ...).
std::string_view datatype_name(DType t);
std::optional<DType> datatype_of(std::string_view name);

struct InferRequest {
  std::string id;
  std::vector<LoDTensor> inputs;  ///< the model's inputs, in order
  int64_t rows = 1;
  std::vector<size_t> outputs;    ///< which of the model's outputs to answer, in the request's order
  std::vector<bool> binary;       ///< per answered output: as binary data (else JSON)
};

/// Parses an infer request's body for `model`. `json_bytes`: the Inference-Header-Content-Length header (the
/// JSON's size, the binary tensor data after it), absent when the body is JSON only. RequestError on bad input.
InferRequest parse_infer(const ModelVersion& model, std::string_view body, std::optional<size_t> json_bytes, const Limits& limits);

/// The answer to `req`: JSON, or JSON followed by the binary outputs (with the Inference-Header-Content-Length
/// header) when any output was asked for as binary.
HttpResponse infer_response(const ModelVersion& model, const InferRequest& req, const std::vector<LoDTensor>& outputs);

/// GET /v2/models/{m}: name, versions, platform, inputs and outputs with datatype and shape.
std::string model_metadata(const ModelVersion& model);

HttpResponse error_response(int status, const std::string& message);

}  // namespace oar::serve
