// tests/onnx/node_tests.cpp: onnx_node_tests runs ONNX models in the layout of ONNX's backend node tests
// (DIR/<test>/model.onnx, test_data_set_N/input_K.pb and output_K.pb) through oar::onnx::import_model and an
// Evaluator, and compares oar's outputs with the expected ones.
//
//   onnx_node_tests [--rtol R] [--atol A] [--table FILE] [--min-pass FRACTION] [--verbose] DIR...
//
// Each DIR is a directory of tests (Debian's libonnx-testdata: /usr/share/libonnx-testdata/data/node) or of
// models oar exported (onnx_fixture's; the round trip). A test is
//   passed       every output has the expected shape and dtype, values within |got - want| <= atol + rtol |want|
//                (ONNX's backend defaults: rtol 1e-3, atol 1e-7);
//   unsupported  the importer refused a node, attribute or type with oar::onnx::UnsupportedError;
//   failed       anything else: a wrong value or shape, an oar::Error while importing or running, an exception.
// The exit status is 1 when a test failed or fewer than FRACTION of the tests passed. --table writes the
// per-op counts as a Markdown table (docs/onnx.md).
#include <oar/oar.hpp>
#include <oar/onnx/onnx.hpp>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

double g_rtol = 1e-3, g_atol = 1e-7;

struct Result {
  enum Kind { passed, unsupported, failed } kind;
  std::string why;
};

// The op a node test is about: the model's node type when it has one node; else the longest ONNX op name that
// starts the test's name (underscores and case ignored: test_reduce_sum_keepdims -> ReduceSum), marked
// "(expanded)" for a function's expansion; else the test's name.
std::string op_of(const fs::path& model, const std::string& test) {
  std::string t = test.rfind("test_", 0) == 0 ? test.substr(5) : test;
  const bool expanded = t.size() > 9 && t.ends_with("_expanded");
  ::onnx::ModelProto m;
  std::ifstream f(model, std::ios::binary);
  if (m.ParseFromIstream(&f) && m.graph().node_size() == 1) return m.graph().node(0).op_type();
  std::string norm;
  for (char c : t)
    if (c != '_') norm += char(std::tolower(static_cast<unsigned char>(c)));
  static const std::vector<std::string> names = [] {
    std::set<std::string> n;
    for (const auto& s : ::onnx::OpSchemaRegistry::get_all_schemas()) n.insert(s.Name());
    return std::vector<std::string>(n.begin(), n.end());
  }();
  std::string best;
  for (const auto& n : names) {
    std::string low;
    for (char c : n) low += char(std::tolower(static_cast<unsigned char>(c)));
    if (norm.rfind(low, 0) == 0 && n.size() > best.size()) best = n;
  }
  if (best.empty()) return t;
  return expanded ? best + " (expanded)" : best;
}

std::string compare(const oar::Tensor& got, const oar::Tensor& want, size_t k) {
  if (got.shape() != want.shape()) return fmt::format("output {}: shape {}, expected {}", k, got.shape().str(), want.shape().str());
  if (got.dtype() != want.dtype()) return fmt::format("output {}: dtype {}, expected {}", k, oar::name(got.dtype()), oar::name(want.dtype()));
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.get(i), w = want.get(i);
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;
    if (!(std::abs(g - w) <= g_atol + g_rtol * std::abs(w)))
      return fmt::format("output {}: element {} is {}, expected {} (|diff| {:.3g})", k, i, g, w, std::abs(g - w));
  }
  return {};
}

Result run_test(const fs::path& dir) {
  oar::Model model = [&] { return oar::onnx::import_model(dir / "model.onnx"); }();
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return {Result::failed, "no test_data_set_*"};
  oar::Evaluator ev(model, model.outputs());
  for (const auto& set : sets) {
    oar::FeedMap feeds;
    for (size_t k = 0; fs::exists(set / fmt::format("input_{}.pb", k)); ++k) {
      if (k >= model.feeds().size()) return {Result::failed, fmt::format("{} has more inputs than the model's {} feeds", set.filename().string(), model.feeds().size())};
      feeds[model.feeds()[k]] = oar::LoDTensor(oar::onnx::read_tensor_proto(set / fmt::format("input_{}.pb", k)));
    }
    auto out = ev.forward(feeds);
    for (size_t k = 0; fs::exists(set / fmt::format("output_{}.pb", k)); ++k) {
      if (k >= out.size()) return {Result::failed, fmt::format("expected more than {} outputs", out.size())};
      std::string why = compare(out[k].to(oar::cpu()), oar::onnx::read_tensor_proto(set / fmt::format("output_{}.pb", k)), k);
      if (!why.empty()) return {Result::failed, set.filename().string() + ": " + why};
    }
  }
  return {Result::passed, {}};
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<fs::path> roots;
  std::string table;
  double min_pass = 0;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rtol" && i + 1 < argc) g_rtol = std::atof(argv[++i]);
    else if (a == "--atol" && i + 1 < argc) g_atol = std::atof(argv[++i]);
    else if (a == "--table" && i + 1 < argc) table = argv[++i];
    else if (a == "--min-pass" && i + 1 < argc) min_pass = std::atof(argv[++i]);
    else if (a == "--verbose") verbose = true;
    else if (!a.empty() && a[0] != '-') roots.push_back(a);
    else {
      std::fprintf(stderr, "usage: onnx_node_tests [--rtol R] [--atol A] [--table FILE] [--min-pass FRACTION] [--verbose] DIR...\n");
      return 2;
    }
  }
  if (roots.empty()) {
    std::fprintf(stderr, "onnx_node_tests: no test directories given\n");
    return 2;
  }
  oar::set_num_threads(1);
  std::vector<std::pair<std::string, fs::path>> tests;
  for (const auto& r : roots) {
    if (!fs::is_directory(r)) {
      std::fprintf(stderr, "onnx_node_tests: '%s' is not a directory\n", r.c_str());
      return 2;
    }
    for (const auto& e : fs::directory_iterator(r))
      if (fs::exists(e.path() / "model.onnx")) tests.push_back({e.path().filename().string(), e.path()});
  }
  std::sort(tests.begin(), tests.end());
  std::map<std::string, std::array<int, 3>> per_op;  // passed, unsupported, failed
  std::map<std::string, int> reasons;                 // unsupported: the reason's kind
  int counts[3] = {0, 0, 0};
  for (const auto& [name, dir] : tests) {
    Result r{Result::failed, {}};
    try {
      r = run_test(dir);
    } catch (const oar::onnx::UnsupportedError& e) {
      r = {Result::unsupported, e.what()};
    } catch (const std::exception& e) {
      r = {Result::failed, e.what()};
    }
    ++counts[r.kind];
    ++per_op[op_of(dir / "model.onnx", name)][r.kind];
    static const char* kWord[] = {"PASS", "UNSUPPORTED", "FAIL"};
    if (r.kind == Result::failed || verbose) std::printf("%-12s %s%s%s\n", kWord[r.kind], name.c_str(), r.why.empty() ? "" : ": ", r.why.c_str());
    if (r.kind == Result::unsupported) {
      // "...: oar has no Foo op" -> "no Foo op"; other reasons by their last clause
      std::string w = r.why;
      size_t c = w.rfind(": ");
      ++reasons[c == std::string::npos ? w : w.substr(c + 2)];
    }
  }
  const int total = counts[0] + counts[1] + counts[2];
  std::printf("%d tests: %d passed (%.1f%%), %d unsupported, %d failed\n", total, counts[0], total ? 100.0 * counts[0] / total : 0.0, counts[1],
              counts[2]);
  if (verbose) {
    std::vector<std::pair<int, std::string>> top;
    for (auto& [w, n] : reasons) top.push_back({n, w});
    std::sort(top.rbegin(), top.rend());
    for (size_t i = 0; i < std::min<size_t>(top.size(), 40); ++i) std::printf("  %4d unsupported: %s\n", top[i].first, top[i].second.c_str());
  }
  if (!table.empty()) {
    std::ofstream f(table);
    f << "| test | passed | unsupported | failed |\n|---|---|---|---|\n";
    for (auto& [op, c] : per_op) f << "| " << op << " | " << c[0] << " | " << c[1] << " | " << c[2] << " |\n";
    f << fmt::format("| **all {}** | **{}** | **{}** | **{}** |\n", total, counts[0], counts[1], counts[2]);
  }
  const bool enough = total > 0 && double(counts[0]) >= min_pass * total;
  if (!enough) std::printf("fewer than %.0f%% of the tests passed\n", 100 * min_pass);
  return counts[2] == 0 && enough ? 0 : 1;
}
