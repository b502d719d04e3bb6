// tests/ir/dot.cpp: Graphviz output (ir/dot.hpp): nodes, edges, parameter/data marking, clusters, escaping,
// and, when graphviz's `dot` is installed, that dot parses it into the expected number of nodes and edges.
#include "pch.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "oar/ir/dot.hpp"
#include "support/op_check.hpp"

using namespace oar;

namespace {

/// x (data) -> mul(w) -> relu -> while { sigmoid(h) } ; a var with a quote and @GRAD in its name.
Program make_program() {
  Program p;
  Block& g = p.global_block();
  g.create_var("x", {.dtype = f32, .shape = Shape{-1, 3}});
  g.create_parameter("w", f32, {3, 4});
  g.create_var("counter", {.dtype = i64, .shape = Shape{1}, .persistable = true});
  Operator mul("mul");
  mul.set_input("X", {"x"}).set_input("Y", {"w"}).set_output("Out", {"y"});
  mul.set_origin(Origin("model.cpp", 7, "fc"));
  add_op(g, mul);
  Operator relu("relu");
  relu.set_input("X", {"y"}).set_output("Out", {"odd\"name@GRAD"});
  add_op(g, relu);

  Block& body = p.create_block();
  Operator sig("sigmoid");
  sig.set_input("X", {"y"}).set_output("Out", {"h"});
  add_op(body, sig);
  p.rollback();
  Operator loop("while");
  loop.set_input("X", {"y", "counter"}).set_output("Out", {"h2"});
  loop.set_attr("sub_block", BlockRef{1});
  g.create_var("h2", {.dtype = f32, .shape = Shape{-1, 4}});
  g.append_op(loop);
  return p;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

/// The line of `s` that starts (after indentation) with `id`.
std::string line_of(const std::string& s, const std::string& id) {
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) {
    auto b = l.find_first_not_of(' ');
    if (b != std::string::npos && l.compare(b, id.size() + 1, id + " ") == 0) return l;
  }
  return {};
}

}  // namespace

TEST_CASE("dot: a digraph with one ellipse per variable and one box per op") {
  Program p = make_program();
  std::string d = to_dot(p);
  CHECK(d.starts_with("digraph \"block 0\" {\n"));
  CHECK(d.ends_with("}\n"));
  for (const char* v : {"x", "w", "counter", "y", "h2"}) {
    std::string l = line_of(d, fmt::format("\"v0:{}\"", v));
    CHECK_MESSAGE(l.find("shape=ellipse") != std::string::npos, v);
  }
  CHECK(line_of(d, "\"v1:h\"").find("shape=ellipse") != std::string::npos);
  CHECK(line_of(d, "\"op0:0\"").find("label=\"mul\\nfc\", shape=box") != std::string::npos);
  CHECK(line_of(d, "\"op0:1\"").find("label=\"relu\", shape=box") != std::string::npos);
  CHECK(line_of(d, "\"op0:2\"").find("label=\"while\", shape=box") != std::string::npos);
  CHECK(line_of(d, "\"op1:0\"").find("label=\"sigmoid\", shape=box") != std::string::npos);
  CHECK(count(d, "shape=ellipse") == 7);
  CHECK(count(d, "shape=box") == 4);
}

TEST_CASE("dot: parameters, persistables and data inputs are marked") {
  std::string d = to_dot(make_program());
  std::string w = line_of(d, "\"v0:w\"");
  CHECK(w.find("label=\"w\\nf32[3, 4]\\nparam\"") != std::string::npos);
  CHECK(w.find("fillcolor=\"#ffd8a8\"") != std::string::npos);
  CHECK(line_of(d, "\"v0:counter\"").find("\\npersistable\"") != std::string::npos);
  std::string x = line_of(d, "\"v0:x\"");
  CHECK(x.find("label=\"x\\nf32[?, 3]\\ndata\"") != std::string::npos);
  CHECK(x.find("fillcolor=\"#d3f9d8\"") != std::string::npos);
  // y is written by mul: neither data nor filled.
  CHECK(line_of(d, "\"v0:y\"") == "  \"v0:y\" [label=\"y\\nf32[?, 4]\", shape=ellipse];");
}

TEST_CASE("dot: edges run var -> op -> var with the slot as label; the sub-block is a cluster") {
  std::string d = to_dot(make_program());
  test::check_contains(d, {"  \"v0:x\" -> \"op0:0\" [label=\"X\"];\n", "  \"v0:w\" -> \"op0:0\" [label=\"Y\"];\n",
                           "  \"op0:0\" -> \"v0:y\" [label=\"Out\"];\n"});
  // The sub-block's op reads y of the parent block: the edge crosses into the cluster.
  test::check_contains(d, {"  \"v0:y\" -> \"op1:0\" [label=\"X\"];\n", "  \"op1:0\" -> \"v1:h\" [label=\"Out\"];\n", "subgraph \"cluster_1\" {",
                           "label=\"block 1 (while)\"", "\"op0:2\" -> \"v1:h\" [lhead=\"cluster_1\", style=dashed, label=\"sub_block\"];",
                           "compound=true;"});
}

TEST_CASE("dot: names with quotes, backslashes and @ are escaped") {
  CHECK(dot_quote("a\"b\\c@GRAD") == "\"a\\\"b\\\\c@GRAD\"");
  CHECK(dot_quote("two\nlines") == "\"two\\nlines\"");
  std::string d = to_dot(make_program());
  CHECK(d.find("\"op0:1\" -> \"v0:odd\\\"name@GRAD\" [label=\"Out\"];") != std::string::npos);
  CHECK(d.find("[label=\"odd\\\"name@GRAD\\nf32[?, 4]\", shape=ellipse];") != std::string::npos);
}

TEST_CASE("dot: drawing a sub-block puts the outer variables it uses outside; a bad index is an oar::Error") {
  Program p = make_program();
  std::string d = to_dot(p, 1);
  CHECK(d.starts_with("digraph \"block 1\" {\n"));
  CHECK(line_of(d, "\"v0:y\"").find("shape=ellipse") != std::string::npos);
  CHECK(line_of(d, "\"v1:h\"").find("shape=ellipse") != std::string::npos);
  CHECK(d.find("\"v0:x\"") == std::string::npos);  // not used by block 1
  CHECK(d.find("\"v0:y\" -> \"op1:0\" [label=\"X\"];") != std::string::npos);
  CHECK_THROWS_WITH_AS(to_dot(p, 5), doctest::Contains("program has no block 5"), Error);
}

TEST_CASE("dot: an undeclared variable is dashed; an empty sub-block gets a placeholder") {
  Program p;
  Block& g = p.global_block();
  Operator op("custom");
  op.set_input("X", {"ghost"}).set_attr("sub_block", BlockRef{1});
  p.create_block();
  p.rollback();
  g.append_op(op);
  std::string d = to_dot(p);
  CHECK(line_of(d, "\"v-1:ghost\"").find("(undeclared)\", shape=ellipse, style=dashed") != std::string::npos);
  CHECK(d.find("\"empty1\" [label=\"(empty)\", shape=plaintext];") != std::string::npos);
  CHECK(d.find("\"op0:0\" -> \"empty1\" [lhead=\"cluster_1\"") != std::string::npos);
}

TEST_CASE("dot: graphviz parses the output into the expected nodes and edges") {
  if (std::system("command -v dot > /dev/null 2>&1") != 0) {
    MESSAGE("graphviz `dot` is not installed: parse check skipped");
    return;
  }
  auto dir = std::filesystem::temp_directory_path() / fmt::format("oar_dot_test_{}", std::rand());
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "p.dot") << to_dot(make_program());
  std::string cmd = fmt::format("dot -Tplain '{}' > '{}' 2> '{}'", (dir / "p.dot").string(), (dir / "p.plain").string(), (dir / "err").string());
  int rc = std::system(cmd.c_str());
  std::ifstream err(dir / "err");
  std::string errors((std::istreambuf_iterator<char>(err)), {});
  CHECK_MESSAGE(rc == 0, errors);
  CHECK(errors.empty());
  std::ifstream plain(dir / "p.plain");
  size_t nodes = 0, edges = 0;
  for (std::string l; std::getline(plain, l);) {
    if (l.starts_with("node ")) ++nodes;
    if (l.starts_with("edge ")) ++edges;
  }
  CHECK(nodes == 11);  // 7 variables + 4 ops
  CHECK(edges == 11);  // mul 3, relu 2, sigmoid 2, while 3, sub_block 1
  std::filesystem::remove_all(dir);
}
