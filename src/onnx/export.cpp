// src/onnx/export.cpp: an oar inference program as an ONNX graph. Each oar op becomes one ONNX node or a short
// chain of them; oar's variables become ONNX values (renamed when an op writes a variable a second time, since
// ONNX values are assigned once); parameters become initializers, reshaped where Fluid's broadcast along
// `axis` differs from ONNX's right-aligned one. The result passes ONNX's checker and its strict shape inference
// before it is written.
#include "src/onnx/exporter.hpp"

#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/shape_inference/implementation.h>

namespace oar::onnx {

namespace {

using export_detail::Exporter;

void check(::onnx::ModelProto& m) {
  try {
    ::onnx::checker::check_model(m);
    ::onnx::shape_inference::InferShapes(m, ::onnx::OpSchemaRegistry::Instance(), ::onnx::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    throw Error(fmt::format("export: ONNX's checker rejects the exported model: {}", e.what()));
  }
}

}  // namespace

void export_program(const Program& program, const Scope& scope, const std::filesystem::path& path, const ExportOptions& options) {
  if (options.opset < 13 || options.opset > kMaxOpset) throw Error(fmt::format("export: opset {} is outside 13..{}", options.opset, kMaxOpset));
  if (options.fetches.empty()) throw Error("export: no outputs to export (ExportOptions::fetches)");
  Program p = program.prune(options.fetches).clone(/*for_test=*/true);
  infer_program_shapes(p);
  std::vector<std::string> feeds;  // the feeds the pruned program still reads
  for (const auto& f : options.feeds)
    if (p.global_block().find_var(f)) feeds.push_back(f);
  ::onnx::ModelProto m = Exporter(p, scope, options).run(feeds, options.fetches);
  if (options.check) check(m);
  std::string bytes;
  if (!m.SerializeToString(&bytes)) throw Error(fmt::format("export: cannot serialize the model for '{}'", path.string()));
  oar::detail::write_file_atomic(path, bytes);
}

void export_model(const Model& model, const std::filesystem::path& path, const ExportOptions& options) {
  ExportOptions o = options;
  if (o.fetches.empty()) o.fetches = model.outputs();
  if (o.feeds.empty()) o.feeds = model.feeds();
  if (o.fetches.empty()) throw Error("export: the model has no outputs to export");
  export_program(model.program(), model.scope(), path, o);
}

void export_inference_model(const std::filesystem::path& model_dir, const std::filesystem::path& path, const ExportOptions& options) {
  export_model(Model::load_inference(model_dir), path, options);
}

}  // namespace oar::onnx
