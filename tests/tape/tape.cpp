// tests/tape/tape.cpp: the Tape: RAII current tape, recording, replay up to outputs, branches, skip,
// evaluators, sub-tapes, determinism and errors that name the caller's line.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using test::op_types;

namespace {
using Ops = std::vector<std::string>;
}  // namespace

TEST_CASE("tape: the newest live tape is current; destruction restores the outer one") {
  CHECK_THROWS_WITH_AS(data("x", f32, {-1, 3}), doctest::Contains("no oar::Tape is alive"), Error);
  Tape outer;
  CHECK(&Tape::current() == &outer);
  {
    Tape inner;
    CHECK(&Tape::current() == &inner);
    auto x = data("x", f32, {-1, 3});
    CHECK(inner.size() == 1);
    CHECK(outer.size() == 0);
  }
  CHECK(&Tape::current() == &outer);
}

TEST_CASE("tape: a Var of a dead tape is a clear error naming where it was recorded") {
  Var stale;
  int line = 0;
  {
    Tape t;
    line = __LINE__ + 1;
    stale = data("x", f32, {-1, 3});
  }
  Tape t2;
  std::string msg;
  try {
    fc(stale, 4);
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("no longer exists") != std::string::npos);
  CHECK(msg.find("tape.cpp:" + std::to_string(line)) != std::string::npos);
}

TEST_CASE("tape: a dead tape's state goes with its last Var (creations hold Vars, which hold the state)") {
  std::weak_ptr<std::weak_ptr<void>> slot;  // owned by the tape's state, and by each Topology of it
  Var kept;
  {
    Tape t;
    Var x = data("x", f32, {-1, 3});
    kept = fc(fc(x, 4).act(relu), 2);
    slot = t.program(kept).param_slot;
    CHECK_FALSE(slot.expired());
  }
  CHECK_FALSE(slot.expired());  // a Var of the dead tape still names its creation in errors
  CHECK_THROWS_WITH_AS((void)kept.shape(), doctest::Contains("no longer exists"), Error);
  kept = Var();
  CHECK(slot.expired());
}

TEST_CASE("tape: program() replays up to the chosen output into main + startup programs") {
  Tape tape;
  auto img = data("img", f32, {-1, 784});
  auto label = data("label", i64, {-1, 1});
  auto hidden = fc(img, 200).act(relu);
  auto pred = fc(hidden, 10).act(softmax).name("prediction");
  auto cost = mean(cross_entropy(pred, label));
  auto acc = accuracy(pred, label);

  Topology t = tape.program({cost, acc});
  CHECK(op_types(t.main) == Ops{"mul", "elementwise_add", "relu", "mul", "elementwise_add", "softmax", "cross_entropy", "mean", "top_k", "accuracy"});
  CHECK(t.main.global_block().has_var("prediction"));
  CHECK(t.main.global_block().var("fc_0.w_0").shape() == Shape{784, 200});
  CHECK(t.main.global_block().var("prediction.w_0").is_parameter());
  CHECK(t.main.global_block().var("prediction").shape() == Shape{-1, 10});
  CHECK(t.main.global_block().var(t.outputs[0]).shape() == Shape{1});
  CHECK(t.feeds == std::vector<std::string>{"img", "label"});
  // Parameters' init ops are prepended to the startup program: the last created comes first.
  CHECK(op_types(t.startup) == Ops{"fill_constant", "uniform_random", "fill_constant", "uniform_random"});
  CHECK(t.startup.global_block().op(3).output("Out")[0] == "fc_0.w_0");

  // The same tape, another output: everything after `prediction` is left out.
  Topology infer = tape.program(pred);
  CHECK(op_types(infer.main) == Ops{"mul", "elementwise_add", "relu", "mul", "elementwise_add", "softmax"});
  CHECK(infer.outputs == std::vector<std::string>{"prediction"});
}

TEST_CASE("tape: evaluators recorded before the outputs stay although no output depends on them") {
  Tape tape;
  auto x = data("x", f32, {-1, 4});
  auto label = data("label", i64, {-1, 1});
  auto pred = fc(x, 3).act(softmax);
  auto acc = accuracy(pred, label);  // nothing consumes acc
  auto cost = mean(cross_entropy(pred, label));
  (void)acc;
  Topology t = tape.program(cost);
  auto ops = op_types(t.main);
  CHECK(std::count(ops.begin(), ops.end(), "accuracy") == 1);
}

TEST_CASE("tape: replaying the same tape twice gives identical programs") {
  Tape tape;
  auto x = data("x", f32, {-1, 8});
  auto y = fc(fc(x, 16).act(oar::tanh), 4);
  Topology a = tape.program(y), b = tape.program(y);
  CHECK(a.main == b.main);
  CHECK(a.startup == b.startup);
  CHECK(serialize(a.main) == serialize(b.main));
}

TEST_CASE("tape: branches are replayed only when an output lies inside them; skip leaves creations out") {
  Tape tape;
  auto a = data("a", f32, {-1, 8});
  auto c = fc(fc(a, 8), 8);
  Var e, g;
  {
    Branch up;
    e = fc(fc(c, 64), 10);
  }
  {
    Branch down;
    g = fc(fc(c, 32), 10).act(relu);
  }
  Topology te = tape.program(e);
  CHECK(te.main.global_block().var(te.outputs[0]).shape() == Shape{-1, 10});
  CHECK(op_types(te.main).size() == 4 * 2);  // 4 fc layers: mul + bias each
  CHECK(te.main.global_block().has_var("fc_2.w_0"));
  CHECK(te.main.global_block().var("fc_2.w_0").shape() == Shape{8, 64});

  Topology tg = tape.program(g);
  CHECK(op_types(tg.main).size() == 4 * 2 + 1);
  CHECK(tg.main.global_block().var("fc_2.w_0").shape() == Shape{8, 32});  // names restart per replay

  // skip: drop chosen creations (a dependency on a skipped creation is an error naming both lines).
  Tape t2;
  auto x = data("x", f32, {-1, 4});
  auto d = fc(x, 4);
  auto d2 = fc(d, 4);
  auto f = fc(x, 5);
  Topology ts = t2.program(f, skip(d, d2));
  CHECK(op_types(ts.main) == Ops{"mul", "elementwise_add"});
  CHECK(ts.main.global_block().var(ts.outputs[0]).shape() == Shape{-1, 5});
  CHECK_THROWS_WITH_AS(t2.program(d2, skip(d)), doctest::Contains("not part of this program"), Error);
}

TEST_CASE("tape: fluent setters change the recorded creation (act, name, param, bias, typed options, set)") {
  Tape tape;
  auto x = data("x", f32, {-1, 2, 3});
  auto y = fc(x, 4).flatten_dims(2).bias(false).param(ParamAttr("W").with_initializer(Constant(0.5))).act(sigmoid).name("y");
  Topology t = tape.program(y);
  CHECK(op_types(t.main) == Ops{"mul", "sigmoid"});
  CHECK(t.main.global_block().var("W").shape() == Shape{3, 4});
  CHECK(t.main.global_block().var("y").shape() == Shape{-1, 2, 4});
  CHECK(t.startup.global_block().op(0).type() == "fill_constant");
  CHECK(t.startup.global_block().op(0).attr<float>("value") == 0.5f);
  // An option by name that the layer does not take is reported with the caller's line.
  int line = __LINE__ + 1;
  auto z = fc(x, 4).set("stride", 2);
  std::string want = "tape.cpp:" + std::to_string(line) + " (fc): fc does not take the option 'stride'";
  CHECK_THROWS_WITH_AS(tape.program(z), doctest::Contains(want.c_str()), Error);
}

TEST_CASE("tape: a shape mismatch in fc reports the caller's line, the layer and the shapes") {
  Tape tape;
  auto x = data("x", f32, {-1, 3});
  auto w = data("w", f32, {-1, 5});
  int line = __LINE__ + 1;
  auto bad = elementwise_add(x, w);
  std::string msg;
  try {
    tape.program(bad);
  } catch (const Error& e) {
    msg = e.what();
  }
  test::check_contains(msg, {"tape.cpp:" + std::to_string(line), "elementwise_add", "[?, 3]", "[?, 5]"});

  auto img = data("img", f32, {-1});  // fc needs a dim after num_flatten_dims
  line = __LINE__ + 1;
  auto f = fc(img, 10);
  try {
    tape.program(f, skip(bad));
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("tape.cpp:" + std::to_string(line) + " (fc)") != std::string::npos);
}

TEST_CASE("tape: oar::shared reuses the same parameters on every call") {
  Tape tape;
  auto a = data("a", f32, {-1, 16});
  auto b = data("b", f32, {-1, 16});
  auto project = shared([](const Var& text) { return fc(fc(text, 8).act(oar::tanh), 4); });
  auto pa = project(a);
  auto pb = project(b);
  auto other = fc(a, 4);  // not shared
  Topology t = tape.program({pa, pb, other});
  auto params = t.main.parameters();
  CHECK(params.size() == 6);  // 2 fc x (w, b) shared + 1 fc x (w, b)
  std::vector<std::string> muls_y;
  for (auto* op : t.main.global_block().ops())
    if (op->type() == "mul") muls_y.push_back(op->input("Y")[0]);
  REQUIRE(muls_y.size() == 5);
  CHECK(muls_y[0] == muls_y[2]);
  CHECK(muls_y[1] == muls_y[3]);
  CHECK(muls_y[4] != muls_y[0]);
}

TEST_CASE("tape: a creation's body becomes a sub-block (cond)") {
  Tape tape;
  auto x = data("x", f32, {-1, 4});
  auto flag = data("flag", boolean, {1});
  auto y = cond(flag, [&] { return fc(x, 3).act(relu); });
  auto z = fc(y, 2);
  Topology t = tape.program(z);
  REQUIRE(t.main.num_blocks() == 2);
  CHECK(op_types(t.main, 1) == Ops{"mul", "elementwise_add", "relu", "assign"});
  CHECK(op_types(t.main, 0) == Ops{"conditional_block", "mul", "elementwise_add"});
  const Operator& cb = t.main.global_block().op(0);
  CHECK(cb.sub_block() == 1);
  CHECK(t.main.block(1).parent_idx() == 0);
  CHECK(cb.input("Input") == std::vector<std::string>{"x", "fc_0.w_0", "fc_0.b_0"});
  CHECK(t.main.global_block().has_var("fc_0.w_0"));  // parameters land in the global block
  CHECK_FALSE(t.main.block(1).has_var("fc_0.w_0"));
  CHECK(t.main.global_block().var(cb.output("Out")[0]).shape() == Shape{-1, 3});
}
