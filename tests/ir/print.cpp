// tests/ir/print.cpp: the program printer (ir/print.hpp): exact lines for variables, ops and nested blocks.
#include "pch.hpp"

#include <sstream>

#include "oar/ir/print.hpp"

using namespace oar;

namespace {

/// img -> mul(fc_0.w_0) -> relu -> while { relu }: parameters, a persistable, lod levels, a sub-block.
Program make_program() {
  Program p;
  Block& g = p.global_block();
  g.create_var("img", {.dtype = f32, .shape = Shape{-1, 784}, .lod_level = 1});
  g.create_parameter("fc_0.w_0", f32, {784, 10});
  g.create_parameter("fc_0.b_0", f32, {10}, ParamInfo{.trainable = false, .learning_rate = 0.5f});
  g.create_var("step", {.dtype = i64, .shape = Shape{1}, .persistable = true});
  Operator mul("mul");
  mul.set_input("X", {"img"}).set_input("Y", {"fc_0.w_0"}).set_output("Out", {"fc_0.tmp_0"});
  mul.set_origin(Origin("/home/me/src/model.cpp", 12, "fc"));
  add_op(g, mul);
  Operator relu("relu");
  relu.set_input("X", {"fc_0.tmp_0"}).set_output("Out", {"relu_0.tmp_0"});
  add_op(g, relu);
  g.create_var("cond", {.dtype = boolean, .shape = Shape{1}});
  g.create_var("scopes", {.kind = VarKind::step_scopes});

  Block& body = p.create_block();
  body.create_var("h", {.dtype = f32, .shape = Shape{-1, 10}});
  Operator inner("relu");
  inner.set_input("X", {"relu_0.tmp_0"}).set_output("Out", {"h"});
  add_op(body, inner);
  p.rollback();

  Operator loop("while");
  loop.set_input("X", {"relu_0.tmp_0", "step"}).set_input("Condition", {"cond"});
  loop.set_output("Out", {"h"}).set_output("StepScopes", {"scopes"});
  loop.set_attr("sub_block", BlockRef{1});
  g.append_op(loop);
  return p;
}

}  // namespace

TEST_CASE("print: variables, ops and a nested sub-block, line by line") {
  Program p = make_program();
  const std::string expected =
      "block 0 (parent -1)\n"
      "  var img          : f32[?, 784] lod_level=1\n"
      "  var fc_0.w_0     : f32[784, 10] param\n"
      "  var fc_0.b_0     : f32[10] param(trainable=false, lr=0.5)\n"
      "  var step         : i64[1] persistable\n"
      "  var fc_0.tmp_0   : f32[?, 10] lod_level=1\n"
      "  var relu_0.tmp_0 : f32[?, 10] lod_level=1\n"
      "  var cond         : bool[1]\n"
      "  var scopes       : step_scopes\n"
      "  fc_0.tmp_0 = mul(X=img, Y=fc_0.w_0) {x_num_col_dims=1, y_num_col_dims=1}  # model.cpp:12 (fc)\n"
      "  relu_0.tmp_0 = relu(X=fc_0.tmp_0)\n"
      "  (Out=h, StepScopes=scopes) = while(X=[relu_0.tmp_0, step], Condition=cond) {sub_block=block 1}\n"
      "    block 1 (parent 0)\n"
      "      var h : f32[?, 10] lod_level=1\n"  // relu shares X's LoD

      "      h = relu(X=relu_0.tmp_0)\n";
  CHECK(to_string(p) == expected);
}

TEST_CASE("print: fmt formatters and operator<< give the same text as to_string") {
  Program p = make_program();
  CHECK(fmt::format("{}", p) == to_string(p));
  CHECK(fmt::format("{}", p.block(1)) == to_string(p.block(1)));
  std::ostringstream os;
  os << p;
  CHECK(os.str() == to_string(p));

  const Operator& mul = p.global_block().op(0);
  CHECK(fmt::format("{}", mul) == "fc_0.tmp_0 = mul(X=img, Y=fc_0.w_0) {x_num_col_dims=1, y_num_col_dims=1}  # model.cpp:12 (fc)");
  std::ostringstream oo;
  oo << mul;
  CHECK(oo.str() == fmt::format("{}", mul));

  const Variable& img = p.global_block().var("img");
  CHECK(fmt::format("{}", img) == "var img : f32[?, 784] lod_level=1");
  CHECK(fmt::format("{:>40}", img).size() == 40);  // the string_view format spec still applies
  std::ostringstream ov;
  ov << p.global_block().var("fc_0.b_0");
  CHECK(ov.str() == "var fc_0.b_0 : f32[10] param(trainable=false, lr=0.5)");
}

TEST_CASE("print: one block prints alone, with its own sub-blocks nested") {
  Program p = make_program();
  CHECK(to_string(p.block(1)) == "block 1 (parent 0)\n  var h : f32[?, 10] lod_level=1\n  h = relu(X=relu_0.tmp_0)\n");
  std::string g = to_string(p.global_block());
  CHECK(g.find("    block 1 (parent 0)\n") != std::string::npos);
}

TEST_CASE("print: a block no op refers to comes after block 0; the text survives a save/load round trip") {
  Program p = make_program();
  Block& orphan = p.create_block(0);
  orphan.create_var("z", {.dtype = f64, .shape = Shape{2, 3}});
  p.rollback();
  std::string s = to_string(p);
  CHECK(s.ends_with("block 2 (parent 0)\n  var z : f64[2, 3]\n"));
  // Parameters come back as plain persistable variables (Fluid does not serialize ParamInfo).
  Program q = parse_program(serialize(p));
  std::string t = to_string(q);
  CHECK(t.find("var fc_0.w_0     : f32[784, 10] persistable\n") != std::string::npos);
  CHECK(t.find("fc_0.tmp_0 = mul(X=img, Y=fc_0.w_0) {x_num_col_dims=1, y_num_col_dims=1}  # model.cpp:12 (fc)") != std::string::npos);
}

TEST_CASE("print: attribute values of every kind; long lists are shortened") {
  Operator op("custom");
  op.set_input("X", {}).set_output("Out", {"a", "b"});
  op.set_attr("s", std::string("max")).set_attr("f", 0.25f).set_attr("b", false).set_attr("l", int64_t(1) << 40);
  op.set_attr("strs", std::vector<std::string>{"p", "q"}).set_attr("blks", BlockRefs{{1, 2}});
  std::vector<int64_t> many(100);
  for (size_t i = 0; i < many.size(); ++i) many[i] = int64_t(i);
  op.set_attr("shape", many);
  op.set_is_target(true);
  CHECK(to_string(op) ==
        "a, b = custom(X=[]) {b=false, blks=blocks [1, 2], f=0.25, l=1099511627776, s=\"max\", "
        "shape=[0, 1, 2, 3, 4, 5, 6, 7, ... (100 values)], strs=[\"p\", \"q\"]} [target]");
  Operator sink("fetch");
  sink.set_input("X", {"y"});
  CHECK(to_string(sink) == "fetch(X=y)");
}

TEST_CASE("print: other variable kinds and an empty program") {
  Program p;
  Block& g = p.global_block();
  g.create_var("rows", {.dtype = f32, .shape = Shape{-1, 8}, .kind = VarKind::selected_rows});
  g.create_var("arr", {.dtype = f32, .shape = Shape{-1, 8}, .lod_level = 2, .kind = VarKind::lod_tensor_array});
  g.create_var("feed", {.persistable = true, .kind = VarKind::feed_minibatch});
  CHECK(to_string(p) ==
        "block 0 (parent -1)\n"
        "  var rows : selected_rows<f32[?, 8]>\n"
        "  var arr  : lod_tensor_array<f32[?, 8]> lod_level=2\n"
        "  var feed : feed_minibatch persistable\n");
  CHECK(to_string(Program()) == "block 0 (parent -1)\n");
}

TEST_CASE("print: parameter markers show only what differs from the defaults") {
  Program p;
  Block& g = p.global_block();
  g.create_parameter("a", f32, {2});
  g.create_parameter("b", f32, {2}, ParamInfo{.initializer = "constant(0)"});
  g.create_parameter("c", f32, {2}, ParamInfo{.regularizer = "l2", .regularizer_coeff = 0.0005});
  g.create_parameter("d", f32, {2}, ParamInfo{.gradient_clip = "value", .clip_a = -1, .clip_b = 1});
  g.create_parameter("e", f32, {2}, ParamInfo{.trainable = false, .learning_rate = 0.1f, .gradient_clip = "global_norm", .clip_a = 5});
  CHECK(to_string(p) ==
        "block 0 (parent -1)\n"
        "  var a : f32[2] param\n"
        "  var b : f32[2] param\n"
        "  var c : f32[2] param(regularizer=l2(0.0005))\n"
        "  var d : f32[2] param(clip=value(-1, 1))\n"
        "  var e : f32[2] param(trainable=false, lr=0.1, clip=global_norm(5))\n");
}
