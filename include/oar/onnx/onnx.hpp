// oar/onnx/onnx.hpp: models in and out of ONNX, the exchange format that ONNX Runtime, TensorRT and mobile
// runtimes read and that PyTorch writes. Built on the ONNX C++ library Debian ships (libonnx-dev: the
// protobuf messages, the checker, shape inference), which stays inside liboar_onnx: this header includes none
// of it. Link `oar::onnx` (docs/onnx.md).
//
//   oar::Model model(tape.program(pred));                      // trained as usual
//   oar::onnx::export_model(model, "net.onnx");                // feeds -> graph inputs, outputs -> graph outputs
//   oar::Model back = oar::onnx::import_model("net.onnx");     // runs, fine-tunes, saves as an oar model
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "oar/api/model.hpp"

namespace oar::onnx {

/// The ai.onnx opsets import reads (export writes 13..17). Before opset 7 element-wise ops broadcast only
/// through a `broadcast` attribute, which import refuses; ops whose meaning has not changed since read as now.
inline constexpr int64_t kMinOpset = 1, kMaxOpset = 17;

/// What import_model throws for a node, attribute or type oar cannot run (as opposed to a malformed model,
/// which is a plain oar::Error): the node-test driver counts these as unsupported, not failed.
class UnsupportedError : public Error {
 public:
  using Error::Error;
};

struct ExportOptions {
  int64_t opset = 17;  ///< the ai.onnx opset the model declares (13..17)
  /// Graph inputs and outputs by variable name; empty: the model's feeds and outputs.
  std::vector<std::string> feeds, fetches;
  std::string producer = "oar";
  /// Run ONNX's checker and its strict shape inference on the result before writing it.
  bool check = true;
};

/// Writes `model`'s inference program (the ops its fetches need, with is_test set) as an ONNX model: its
/// parameters become initializers, unknown dims (-1, the batch) become symbolic dims, fused ops are expanded
/// into ONNX ops. An op ONNX cannot express is an oar::Error naming the op and the line that created it.
void export_model(const Model& model, const std::filesystem::path& path, const ExportOptions& options = {});
/// The same for a program and the scope holding its parameters (`options.feeds` and `fetches` name the graph's
/// inputs and outputs; fetches must be given).
void export_program(const Program& program, const Scope& scope, const std::filesystem::path& path, const ExportOptions& options);
/// The same for an inference-model directory (Model::save_inference, or Fluid's layout).
void export_inference_model(const std::filesystem::path& model_dir, const std::filesystem::path& path, const ExportOptions& options = {});

/// How import_model treats what it reads.
struct ImportOptions {
  /// Make float initializers trainable parameters (so that Optimizer / append_backward update them).
  bool trainable = true;
};

/// Reads an ONNX model (opsets kMinOpset..kMaxOpset of ai.onnx) as a Model whose feeds are the graph's inputs
/// that are not initializers and whose outputs are the graph's outputs. A node oar cannot run is an oar::Error
/// naming the node, its op type and the opset.
Model import_model(const std::filesystem::path& path, Place place = cpu(), const ImportOptions& options = {});
Model import_model_bytes(const std::string& bytes, Place place = cpu(), const ImportOptions& options = {}, const std::string& what = "<memory>");

/// The ai.onnx op types import_model maps (sorted), so that a caller can tell "unsupported" from "wrong".
std::vector<std::string> supported_import_ops();

/// A serialized onnx.TensorProto (a node test's input_N.pb / output_N.pb) as a tensor, and its name.
Tensor read_tensor_proto(const std::filesystem::path& file, std::string* name = nullptr);
/// `t` written as a serialized onnx.TensorProto named `name` (the node tests' layout), atomically.
void write_tensor_proto(const std::filesystem::path& file, const Tensor& t, const std::string& name);

}  // namespace oar::onnx
