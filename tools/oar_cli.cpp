// tools/oar_cli.cpp: the `oar` command: print a saved program, draw it as Graphviz DOT, show its protobuf
// text form, list the registered ops with their slots and attributes, serve a model repository, or convert
// models to and from ONNX.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "oar/ir/dot.hpp"
#include "oar/ir/print.hpp"
#include "oar/ir/serialize.hpp"
#include "oar/ops/schema_dump.hpp"

#if OAR_CLI_SERVE
namespace oar_cli {
int serve_command(const std::vector<std::string>& args);
}
#endif
#if OAR_CLI_ONNX
namespace oar_cli {
int onnx_command(const std::string& cmd, const std::vector<std::string>& args);
}
#endif

namespace {

constexpr std::string_view kUsage =
    "usage: oar <command> [args]\n"
    "\n"
    "commands:\n"
    "  print FILE             the program saved in FILE, one line per variable and op\n"
    "  dot FILE [BLOCK]       Graphviz DOT of block BLOCK (default 0); render with `dot -Tsvg`\n"
    "  text FILE              the program in protobuf text form (framework.proto, package oar.proto)\n"
    "  ops [TYPE...]          registered ops: slots, attributes with type and default, grad\n"
    "  ops --proto [TYPE...]  the same as Fluid OpProto messages in protobuf text form\n"
    "  serve REPO [options]   serve the models of REPO over HTTP (KServe v2); oar serve --help\n"
    "  export-onnx MODEL_DIR OUT.onnx [--opset N]    a saved model as ONNX; oar export-onnx --help\n"
    "  import-onnx IN.onnx MODEL_DIR [--inference]   an ONNX model as an oar model\n"
    "  --help                 this text\n"
    "\n"
    "FILE is a program saved with oar::save_program (a serialized ProgramDesc, e.g. a Fluid `__model__`).\n";

int usage_error(std::string_view what) {
  std::cerr << "oar: " << what << "\n\n" << kUsage;
  return 2;
}

int cmd_ops(const std::vector<std::string>& args) {
  bool proto = false;
  std::vector<const oar::OpDef*> defs;
  for (auto& a : args) {
    if (a == "--proto") proto = true;
    else defs.push_back(&oar::op_def(a));
  }
  if (defs.empty()) defs = oar::OpRegistry::instance().all();
  for (size_t i = 0; i < defs.size(); ++i) {
    if (proto) std::cout << (i ? "\n" : "") << "# " << defs[i]->type << "\n" << oar::op_proto_text(*defs[i]);
    else std::cout << (i ? "\n" : "") << oar::schema_str(*defs[i]);
  }
  return 0;
}

int run(const std::vector<std::string>& args) {
  if (args.empty()) return usage_error("no command");
  const std::string& cmd = args[0];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::cout << kUsage;
    return 0;
  }
  if (cmd == "ops") return cmd_ops({args.begin() + 1, args.end()});
#if OAR_CLI_SERVE
  if (cmd == "serve") return oar_cli::serve_command({args.begin() + 1, args.end()});
#endif
#if OAR_CLI_ONNX
  if (cmd == "export-onnx" || cmd == "import-onnx") return oar_cli::onnx_command(cmd, {args.begin() + 1, args.end()});
#endif
  if (cmd == "print" || cmd == "text" || cmd == "dot") {
    size_t max_args = cmd == "dot" ? 3 : 2;
    if (args.size() < 2) return usage_error(cmd + ": needs a FILE");
    if (args.size() > max_args) return usage_error(cmd + ": too many arguments");
    oar::Program p = oar::load_program(args[1]);
    if (cmd == "print") std::cout << oar::to_string(p);
    else if (cmd == "text") std::cout << oar::to_text(p);
    else {
      int block = 0;
      if (args.size() == 3) {
        char* end = nullptr;
        long b = std::strtol(args[2].c_str(), &end, 10);
        if (args[2].empty() || *end != '\0') return usage_error("dot: BLOCK must be a block index, got '" + args[2] + "'");
        block = int(b);
      }
      std::cout << oar::to_dot(p, block);
    }
    return 0;
  }
  return usage_error("unknown command '" + cmd + "'");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run({argv + 1, argv + argc});
  } catch (const oar::Error& e) {
    std::cerr << "oar: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "oar: " << e.what() << "\n";
    return 1;
  }
}
