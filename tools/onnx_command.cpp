// tools/onnx_command.cpp: `oar export-onnx` and `oar import-onnx` (liboar_onnx, docs/onnx.md).
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "oar/onnx/onnx.hpp"

namespace oar_cli {

namespace fs = std::filesystem;

namespace {

constexpr const char* kHelp =
    "usage: oar export-onnx MODEL_DIR OUT.onnx [--opset N]\n"
    "       oar import-onnx IN.onnx MODEL_DIR [--inference]\n"
    "\n"
    "export-onnx  MODEL_DIR is a model saved with Model::save (its outputs are exported) or an inference model\n"
    "             (Model::save_inference, or Fluid's layout); --opset 13..17 (default 17)\n"
    "import-onnx  writes an oar model (Model::save: trainable, loads with Model::load); --inference writes an\n"
    "             inference model instead (Model::save_inference, what `oar serve` serves)\n";

int usage(const std::string& why) {
  std::cerr << "oar: " << why << "\n\n" << kHelp;
  return 2;
}

}  // namespace

int onnx_command(const std::string& cmd, const std::vector<std::string>& args) {
  std::vector<std::string> pos;
  int64_t opset = 17;
  bool inference = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::cout << kHelp;
      return 0;
    }
    if (args[i] == "--opset" && cmd == "export-onnx" && i + 1 < args.size()) {
      char* end = nullptr;
      opset = std::strtoll(args[++i].c_str(), &end, 10);
      if (*end != '\0') return usage("--opset needs a number, got '" + args[i] + "'");
    } else if (args[i] == "--inference" && cmd == "import-onnx") {
      inference = true;
    } else if (!args[i].empty() && args[i][0] == '-') {
      return usage(cmd + ": unknown option '" + args[i] + "'");
    } else {
      pos.push_back(args[i]);
    }
  }
  if (pos.size() != 2) return usage(cmd + ": needs two paths");
  if (cmd == "export-onnx") {
    const fs::path dir = pos[0];
    oar::onnx::ExportOptions o;
    o.opset = opset;
    const oar::Model model = fs::exists(dir / "__meta__") ? oar::Model::load(dir) : oar::Model::load_inference(dir);
    oar::onnx::export_model(model, pos[1], o);
    std::cout << "wrote " << pos[1] << " (opset " << opset << ")\n";
    return 0;
  }
  const oar::Model model = oar::onnx::import_model(pos[0]);
  if (inference) model.save_inference(pos[1]);
  else model.save(pos[1]);
  std::cout << "wrote " << pos[1] << ": feeds";
  for (auto& f : model.feeds()) std::cout << " " << f;
  std::cout << ", outputs";
  for (auto& f : model.outputs()) std::cout << " " << f;
  std::cout << "\n";
  return 0;
}

}  // namespace oar_cli
