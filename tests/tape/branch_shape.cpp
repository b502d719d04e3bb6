// tests/tape/branch_shape.cpp: which creations a replay takes (branches chosen by dependence, skip,
// evaluators) and a Var's shape, dtype and lod level while building.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using test::op_types;
using test::error_of;

namespace {
using Ops = std::vector<std::string>;
/// The shapes of the weights (`*.w_*`) in the order they were created.
std::vector<Shape> weight_shapes(const Topology& t) {
  std::vector<Shape> out;
  for (auto* p : t.main.parameters())
    if (p->name().find(".w_") != std::string::npos) out.push_back(p->shape());
  return out;
}
const Ops trunk = {"mul", "elementwise_add", "relu", "mul", "elementwise_add", "relu"};
const Ops head = {"mul", "elementwise_add", "relu", "mul", "elementwise_add", "softmax"};
/// What `make` records, recorded in a Branch of its own.
template <class F>
Var in_branch(F make) {
  Branch b;
  return make();
}
Ops cat(std::initializer_list<Ops> parts) {
  Ops out;
  for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
}  // namespace

// The seeds' example: a -> b -> c, then c -> d -> e (up) and c -> f -> g (down), each a classifier head.
TEST_CASE("branch: a cost outside the branches replays the branch it depends on and leaves the other out") {
  Tape tape;
  auto img = data("img", f32, {-1, 8});
  auto label = data("label", i64, {-1, 1});
  auto c = fc(fc(img, 16).act(relu), 16).act(relu);
  Var pred_up = in_branch([&] { return fc(fc(c, 32).act(relu), 10).act(softmax); });
  Var pred_down = in_branch([&] { return fc(fc(c, 24).act(relu), 3).act(softmax); });
  auto cost_up = mean(cross_entropy(pred_up, label));
  auto acc_up = accuracy(pred_up, label);
  auto cost_down = mean(cross_entropy(pred_down, label));
  auto acc_down = accuracy(pred_down, label);

  Topology tu = tape.program(cost_up);
  CHECK(op_types(tu.main) == cat({trunk, head, {"cross_entropy", "mean"}}));
  CHECK(weight_shapes(tu) == std::vector<Shape>{{8, 16}, {16, 16}, {16, 32}, {32, 10}});
  CHECK(tu.main.global_block().var(tu.outputs[0]).shape() == Shape{1});
  CHECK(tu.feeds == std::vector<std::string>{"img", "label"});

  // cost_up and acc_up, recorded before cost_down outside the branches, read the up branch: they go with it.
  Topology td = tape.program(cost_down);
  CHECK(op_types(td.main) == cat({trunk, head, {"cross_entropy", "mean"}}));
  CHECK(weight_shapes(td) == std::vector<Shape>{{8, 16}, {16, 16}, {16, 24}, {24, 3}});
  CHECK(td.main.global_block().var(td.outputs[0]).shape() == Shape{1});
  CHECK(td.main.parameters().size() == 8);

  // An evaluator nobody chose stays when its branch is replayed (it lies before the last output).
  auto both = elementwise_add(cost_up, cost_down);
  Topology tb = tape.program(both);
  CHECK(op_types(tb.main) == cat({trunk, head, head, {"cross_entropy", "mean", "top_k", "accuracy", "cross_entropy", "mean", "top_k", "accuracy", "elementwise_add"}}));
  CHECK(weight_shapes(tb) == std::vector<Shape>{{8, 16}, {16, 16}, {16, 32}, {32, 10}, {16, 24}, {24, 3}});

  // skip still removes creations explicitly: the evaluators, or a creation an output needs (an error).
  Topology ts = tape.program(both, skip(acc_up, acc_down));
  CHECK(op_types(ts.main) == cat({trunk, head, head, {"cross_entropy", "mean", "cross_entropy", "mean", "elementwise_add"}}));
  Topology tsd = tape.program({cost_down, acc_down}, skip(acc_up));
  CHECK(op_types(tsd.main) == cat({trunk, head, {"cross_entropy", "mean", "top_k", "accuracy"}}));
  std::string msg = error_of([&] { tape.program(cost_up, skip(pred_up)); });
  test::check_contains(msg, {"cross_entropy uses fc (recorded at " + pred_up.origin().file + ":" + std::to_string(pred_up.origin().line),
                             "not part of this program", ":" + std::to_string(cost_up.origin().line) + " (cross_entropy)"});
}

TEST_CASE("branch: an output inside a branch picks it; a body that reads a branch output opens it") {
  Tape tape;
  auto x = data("x", f32, {-1, 4});
  auto flag = data("flag", boolean, {1});
  Var side = in_branch([&] { return fc(x, 6).act(relu); });
  Var other = in_branch([&] { return fc(x, 7); });
  Topology to = tape.program(other);
  CHECK(op_types(to.main) == Ops{"mul", "elementwise_add"});
  CHECK(weight_shapes(to) == std::vector<Shape>{{4, 7}});

  // cond's body reads `side`: needing the cond needs its body, hence the branch.
  auto y = cond(flag, [&] { return fc(side, 3); });
  auto z = fc(y, 2);
  Topology t = tape.program(z);
  REQUIRE(t.main.num_blocks() == 2);
  CHECK(op_types(t.main, 0) == Ops{"mul", "elementwise_add", "relu", "conditional_block", "mul", "elementwise_add"});
  CHECK(op_types(t.main, 1) == Ops{"mul", "elementwise_add", "assign"});
  CHECK(weight_shapes(t) == std::vector<Shape>{{4, 6}, {6, 3}, {3, 2}});
}

TEST_CASE("branch: a creation nobody chose whose body reads a left-out branch is left out with it") {
  Tape tape;
  auto x = data("x", f32, {-1, 4});
  auto flag = data("flag", boolean, {1});
  Var up_out = in_branch([&] { return fc(x, 5); });
  Var down_out = in_branch([&] { return fc(x, 6); });
  auto side = cond(flag, [&] { return fc(up_out, 3); });
  auto cost = mean(down_out);
  Topology t = tape.program(cost);
  CHECK(t.main.num_blocks() == 1);
  CHECK(op_types(t.main) == Ops{"mul", "elementwise_add", "mean"});
  CHECK(weight_shapes(t) == std::vector<Shape>{{4, 6}});
  // Chosen, the cond brings the up branch and leaves the down one out.
  Topology ts = tape.program(side);
  CHECK(op_types(ts.main) == Ops{"mul", "elementwise_add", "conditional_block"});
  CHECK(weight_shapes(ts) == std::vector<Shape>{{4, 5}, {5, 3}});
}

TEST_CASE("shape: a Var's shape, dtype and lod level are known while building") {
  Tape tape;
  auto img = data("img", f32, {-1, 784});
  auto h = fc(img, 200).act(relu);
  CHECK(h.shape() == Shape{-1, 200});
  CHECK(h.dtype() == f32);
  CHECK(h.lod_level() == 0);

  auto pic = data("pic", f32, {-1, 3, 32, 32});
  auto conv = conv2d(pic, 16, 5).set("padding", 2).set("stride", 2);  // (32 + 4 - 5) / 2 + 1 = 16
  CHECK(conv.shape() == Shape{-1, 16, 16, 16});
  CHECK(conv2d(pic, 8, 3).shape() == Shape{-1, 8, 30, 30});

  auto label = data("label", i64, {-1, 1});
  CHECK(label.dtype() == i64);
  CHECK(label.shape() == Shape{-1, 1});
  CHECK(cast(label, f64).dtype() == f64);
  auto words = data("words", i64, {-1, 1}).set("lod_level", 1);
  CHECK(words.lod_level() == 1);
  CHECK(embedding(words, {100, 16}).shape() == Shape{-1, 16});

  auto parts = split(pic, 2, 2);
  REQUIRE(parts.size() == 2);
  CHECK(parts[1].shape() == Shape{-1, 3, 16, 32});

  // Inside a branch, and inside a body.
  Var branched = in_branch([&] { return fc(h, 10); });
  Var inner;
  CHECK(branched.shape() == Shape{-1, 10});
  auto flag = data("flag", boolean, {1});
  auto y = cond(flag, [&] {
    inner = fc(img, 3).act(relu);
    return inner;
  });
  CHECK(inner.shape() == Shape{-1, 3});
  CHECK(y.shape() == Shape{-1, 3});
}

TEST_CASE("shape: a later option change shows in the shape of the Var and of what reads it") {
  Tape tape;
  auto x = data("x", f32, {-1, 2, 3});
  auto y = fc(x, 4);
  auto r = relu(y);
  CHECK(y.shape() == Shape{-1, 4});
  CHECK(r.shape() == Shape{-1, 4});
  y.set("num_flatten_dims", 2);
  CHECK(y.shape() == Shape{-1, 2, 4});
  CHECK(r.shape() == Shape{-1, 2, 4});
  Topology t = tape.program(r);
  CHECK(t.main.global_block().var(t.outputs[0]).shape() == Shape{-1, 2, 4});
  // A change upstream mends a shape error downstream: b flattens 2 dims of a, which a has only once it
  // flattens 2 dims of x.
  auto a = fc(x, 5);
  auto b = fc(a, 3).set("num_flatten_dims", 2);
  CHECK_THROWS_WITH_AS(b.shape(), doctest::Contains("fc: input fc_0.tmp_1 has shape [?, 5], which has no dims after num_flatten_dims = 2"), Error);
  CHECK(a.shape() == Shape{-1, 5});
  a.set("num_flatten_dims", 2);
  CHECK(a.shape() == Shape{-1, 2, 5});
  CHECK(b.shape() == Shape{-1, 2, 3});
}

TEST_CASE("shape: errors name the user's lines") {
  Var stale;
  int line = 0;
  {
    Tape t;
    line = __LINE__ + 1;
    stale = fc(data("x", f32, {-1, 3}), 4);
  }
  std::string msg = error_of([&] { (void)stale.shape(); });
  CHECK(msg.find("was recorded on an oar::Tape that no longer exists") != std::string::npos);
  CHECK(msg.find("branch_shape.cpp:" + std::to_string(line) + " (fc)") != std::string::npos);
  CHECK_THROWS_WITH_AS(Var().dtype(), doctest::Contains("this oar::Var is empty"), Error);

  Tape tape;
  auto x = data("x", f32, {-1, 3});
  auto w = data("w", f32, {-1, 5});
  int bad_line = __LINE__ + 1;
  auto bad = elementwise_add(x, w);
  int use_line = __LINE__ + 1;
  auto use = fc(bad, 2);
  msg = error_of([&] { (void)use.shape(); });
  CHECK(msg.starts_with(std::string(__FILE__) + ":" + std::to_string(bad_line) + " (elementwise_add): "));
  test::check_contains(msg, {"[?, 3]", "[?, 5]", "while working out the shape and dtype of fc recorded at ",
                             "branch_shape.cpp:" + std::to_string(use_line) + " (fc)"});

  // Only what the Var needs is replayed: an unrelated bad option does not get in the way.
  int opt_line = __LINE__ + 1;
  auto odd = fc(x, 4).set("stride", 2);
  auto fine = fc(x, 6);
  CHECK(fine.shape() == Shape{-1, 6});
  msg = error_of([&] { (void)odd.shape(); });
  CHECK(msg.starts_with(std::string(__FILE__) + ":" + std::to_string(opt_line) + " (fc): fc does not take the option 'stride'"));
}
