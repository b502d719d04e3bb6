// tests/api/fuse.cpp: fuse_for_inference and EvaluatorOptions::fuse: conv2d -> bias add [-> relu] becomes one
// conv2d_fusion op, the fused evaluator gives bit-identical outputs, fetched and shared intermediates stay.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;

namespace {

int count_ops(const Program& p, const std::string& type) {
  int n = 0;
  for (auto* op : p.global_block().ops()) n += op->type() == type;
  return n;
}

/// The book conv net: conv 5x5x20 relu, pool, batch norm, conv 5x5x50 relu, pool, fc 10 softmax; the second
/// conv has no activation when `second_act` is false.
struct ConvNet {
  Var img, c1, c2, pred;
  explicit ConvNet(bool second_act = true) {
    img = data("img", f32, {-1, 1, 28, 28});
    c1 = conv2d(img, 20, 5).act(relu);
    Var p1 = pool2d(c1, 2);
    Var bn = batch_norm(p1);
    c2 = second_act ? conv2d(bn, 50, 5).act(relu) : conv2d(bn, 50, 5);
    pred = fc(pool2d(c2, 2), 10).act(softmax);
  }
};

FeedMap random_images(const std::string& feed, int64_t n, uint64_t seed) {
  return {{feed, LoDTensor(test::random_tensor<float>({n, 1, 28, 28}, 0, 1, seed))}};
}

}  // namespace

TEST_CASE("fuse: conv2d + bias + relu become conv2d_fusion with bit-identical outputs") {
  Tape tape;
  ConvNet net;
  Model model(tape.program(net.pred));
  Evaluator plain(model);
  Evaluator fused(model, {}, {.fuse = true});
  CHECK(count_ops(plain.program(), "conv2d") == 2);
  CHECK(count_ops(fused.program(), "conv2d") == 0);
  CHECK(count_ops(fused.program(), "conv2d_fusion") == 2);
  CHECK(count_ops(fused.program(), "relu") == 0);
  CHECK(fused.program().global_block().num_ops() == plain.program().global_block().num_ops() - 4);
  for (auto* op : fused.program().global_block().ops())
    if (op->type() == "conv2d_fusion") {
      CHECK(op->attr<std::string>("activation") == "relu");
      CHECK(op->input("Bias").size() == 1);
    }
  for (int64_t n : {1, 7, 64}) {
    CAPTURE(n);
    auto feeds = random_images(model.name_of(net.img), n, uint64_t(n));
    auto a = plain.forward(feeds), b = fused.forward(feeds);
    REQUIRE(a[0].numel() == n * 10);
    CHECK(a[0].to_vector<float>() == b[0].to_vector<float>());
    // The fused op writes the relu's output variable: the activation is the same tensor.
    CHECK(plain.activation(model.name_of(net.c1)).to_vector<float>() == fused.activation(model.name_of(net.c1)).to_vector<float>());
  }
  // The intermediates are gone from the fused program, and asking for one says why.
  std::string conv_out;
  for (auto* op : plain.program().global_block().ops())
    if (op->type() == "conv2d") conv_out = op->output("Output")[0];
  CHECK(!fused.program().global_block().has_var(conv_out));
  plain.forward(random_images(model.name_of(net.img), 2, 1));
  CHECK(plain.activation(conv_out).numel() > 0);
  auto msg = test::error_of([&] { fused.activation(conv_out); });
  CHECK(msg.find("fused it away") != std::string::npos);
  CHECK(msg.find(conv_out) != std::string::npos);
}

TEST_CASE("fuse: a conv without activation fuses with identity; fetched intermediates are kept") {
  Tape tape;
  ConvNet net(/*second_act=*/false);
  Program p = tape.program(net.pred).main.clone(true);
  std::string bias_out;  // the second conv's bias-add output (no relu after it)
  for (auto* op : p.global_block().ops())
    if (op->type() == "elementwise_add" && op->attr_or<int32_t>("axis", -1) == 1) bias_out = op->output("Out")[0];
  REQUIRE(!bias_out.empty());
  Program all = p.clone();
  FuseReport r = fuse_for_inference(all);
  CHECK(r.conv_bias_act == 2);
  CHECK(r.removed.size() == 3);  // conv1's output and bias-add output, conv2's output
  int identity = 0;
  for (auto* op : all.global_block().ops())
    if (op->type() == "conv2d_fusion") identity += op->attr<std::string>("activation") == "identity";
  CHECK(identity == 1);

  // Keeping the first conv's raw output leaves that conv alone.
  std::string first_conv_out = p.global_block().op(0).type() == "conv2d" ? p.global_block().op(0).output("Output")[0] : "";
  for (auto* op : p.global_block().ops())
    if (op->type() == "conv2d" && first_conv_out.empty()) first_conv_out = op->output("Output")[0];
  Program kept = p.clone();
  FuseReport k = fuse_for_inference(kept, {first_conv_out});
  CHECK(k.conv_bias_act == 1);
  CHECK(count_ops(kept, "conv2d") == 1);
  CHECK(kept.global_block().has_var(first_conv_out));
}

TEST_CASE("fuse: a conv output read twice, or a bias on another axis, is not fused") {
  auto build = [](bool second_reader, int axis) {
    Program p;
    Block& b = p.global_block();
    b.create_var("x", {.dtype = f32, .shape = Shape{-1, 3, 8, 8}});
    b.create_var("w", {.dtype = f32, .shape = Shape{4, 3, 3, 3}, .persistable = true});
    b.create_var("bias", {.dtype = f32, .shape = axis == 1 ? Shape{4} : Shape{6}, .persistable = true});
    Operator conv("conv2d");
    conv.set_input("Input", {"x"}).set_input("Filter", {"w"}).set_output("Output", {"c"});
    add_op(b, std::move(conv));
    Operator add("elementwise_add");
    add.set_input("X", {"c"}).set_input("Y", {"bias"}).set_output("Out", {"o"}).set_attr("axis", axis);
    add_op(b, std::move(add));
    if (second_reader) {
      Operator r("relu");
      r.set_input("X", {"c"}).set_output("Out", {"r"});
      add_op(b, std::move(r));
    }
    return p;
  };
  Program ok = build(false, 1);
  CHECK(fuse_for_inference(ok).conv_bias_act == 1);
  CHECK(count_ops(ok, "conv2d_fusion") == 1);
  CHECK(ok.global_block().op(0).output("Output") == std::vector<std::string>{"o"});
  Program twice = build(true, 1);
  CHECK(fuse_for_inference(twice).conv_bias_act == 0);
  Program other_axis = build(false, 3);  // a bias along the width, not the channels
  CHECK(fuse_for_inference(other_axis).conv_bias_act == 0);
}
