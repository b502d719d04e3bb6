// tests/layers/shape_checks.cpp: shape mismatches that a program's build catches, at the user's line, instead
// of a run failing later somewhere else: a DynamicRNN memory updated with a value of another width, a while
// loop variable whose width changes in the body; and the feed and fetch errors of a run, which name the feed's
// `data` line and, for an unknown fetch, the names nearest to it.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// The lines of this file where rnn_of_width records the memory and its update.
struct RnnLines {
  int memory = 0, update = 0;
};

/// The mean of a DynamicRNN's outputs over x [?, 3] (one LoD level) whose memory has width 4 and whose step
/// updates it with a value of `width`.
Var rnn_of_width(int64_t width, RnnLines& lines) {
  Var x = data("x", f64, {-1, 3}).lod_level(1);
  DynamicRNN rnn;
  rnn.step([&] {
    lines.memory = __LINE__ + 1;
    Var h_prev = rnn.memory(Shape{-1, 4}, 0.0, f64);
    Var h = fc({rnn.step_input(x), h_prev}, width).act(oar::tanh);
    lines.update = __LINE__ + 1;
    rnn.update_memory(h_prev, h);
    rnn.output(h);
  });
  return mean(rnn());
}

}  // namespace

TEST_CASE("DynamicRNN: update_memory with a value of another width is an error when the program is built, at its line, naming the memory") {
  Tape tape;
  RnnLines line;
  Var loss = rnn_of_width(5, line);
  std::string e = test::error_of([&] { tape.program(loss); });
  INFO(e);
  test::check_contains(e, {fmt::format("shape_checks.cpp:{} (update_memory)", line.update), fmt::format("shape_checks.cpp:{} (memory)", line.memory),
                           "f64 [?, 5]", "f64 [?, 4]", "the memory 'memory_0'", "width 5 where the memory has width 4"});
}

TEST_CASE("DynamicRNN: update_memory with a value of the memory's width still builds") {
  Tape tape;
  RnnLines line;
  Var loss = rnn_of_width(4, line);
  CHECK_NOTHROW(tape.program(loss));
}

TEST_CASE("while_loop: a loop variable whose width changes in the body is an error when the program is built, naming the body's line") {
  Tape tape;
  Var x = data("x", f64, {-1, 3});
  Var n = data("n", f64, {1});
  Var i0 = fill_constant(Shape{1}, f64, 0);
  int body_line = 0;
  const int loop_line = __LINE__ + 1;
  auto out = while_loop({i0, x}, [&](std::vector<Var> v) { return cast(elementwise_sub(n, v[0]), boolean); },
                        [&](std::vector<Var> v) {
                          body_line = __LINE__ + 1;
                          Var h = fc(v[1], 4).act(oar::tanh);
                          return std::vector<Var>{scale(v[0], 1, 1), h};
                        });
  std::string e = test::error_of([&] { tape.program(mean(out[1])); });
  INFO(e);
  test::check_contains(e, {fmt::format("shape_checks.cpp:{} (while_loop)", loop_line), fmt::format("shape_checks.cpp:{} (fc)", body_line),
                           "loop variable 1", "f64 [?, 3]", "f64 [?, 4]", "dim 1 changes from 3 to 4"});
}

TEST_CASE("while_loop: loop variables whose batch, or a dim declared dynamic, changes in the body still build") {
  Tape tape;
  Var x = data("x", f64, {2, 3});
  Var y = data("y", f64, {-1, -1});
  Var n = data("n", f64, {1});
  Var i0 = fill_constant(Shape{1}, f64, 0);
  auto out = while_loop({i0, x, y}, [&](std::vector<Var> v) { return cast(elementwise_sub(n, v[0]), boolean); },
                        [&](std::vector<Var> v) {
                          return std::vector<Var>{scale(v[0], 1, 1), concat({v[1], v[1]}, 0), concat({v[2], v[2]}, 1)};
                        });
  CHECK_NOTHROW(tape.program({mean(out[1]), mean(out[2])}));
}

TEST_CASE("feed: an invalid LoD names the feed's data line") {
  Tape tape;
  const int data_line = __LINE__ + 1;
  Var x = data("x", f64, {-1, 3}).lod_level(1);
  Var y = mean(x);
  Model model(tape.program(y));
  Evaluator ev(model, {y});
  LoDTensor t(Tensor(Shape{5, 3}, f64), {{0, 2, 5}});
  static_cast<Tensor&>(t) = Tensor(Shape{4, 3}, f64);  // the rows change under the LoD
  std::string e = test::error_of([&] { ev.forward({{"x", t}}); });
  INFO(e);
  CHECK(has(e, "feed 'x': invalid LoD: level 0 ends at 5 but 4 rows follow"));
  CHECK(has(e, fmt::format("shape_checks.cpp:{} (data)", data_line)));
}

TEST_CASE("LoDTensor: a LoD that does not fit the rows is an oar::Error naming the line that built the tensor") {
  const int line = __LINE__ + 1;
  std::string e = test::error_of([&] { LoDTensor t(Tensor(Shape{4, 3}, f64), {{0, 2, 7}}); });
  INFO(e);
  CHECK(has(e, "invalid LoD"));
  CHECK(has(e, fmt::format("shape_checks.cpp:{} (LoDTensor)", line)));
  const int line2 = __LINE__ + 1;
  e = test::error_of([&] { LoDTensor::from_lengths(Tensor(Shape{4, 3}, f64), {{3, 3}}); });
  CHECK(has(e, fmt::format("shape_checks.cpp:{} (LoDTensor)", line2)));
}

TEST_CASE("fetch: an unknown name names the nearest variables of the program") {
  Tape tape;
  Var x = data("x", f64, {-1, 3});
  Var y = mean(fc(x, 2).name("hidden"));
  Topology t = tape.program(y);
  Scope scope;
  Executor exe;
  exe.run(t.startup, scope);
  std::string e = test::error_of([&] { exe.run(t.main, scope, {{"x", LoDTensor(Tensor(Shape{2, 3}, f64))}}, {"hiden"}); });
  INFO(e);
  CHECK(has(e, "cannot fetch 'hiden': no such variable in the program (nearest: 'hidden')"));
  e = test::error_of([&] { exe.run(t.main, scope, {{"x", LoDTensor(Tensor(Shape{2, 3}, f64))}}, {"completely_unrelated"}); });
  CHECK(e == "cannot fetch 'completely_unrelated': no such variable in the program");
}

TEST_CASE("fetch: a variable that the run leaves without a value names the line that declared it") {
  Program p;
  Block& b = p.global_block();
  b.create_var("x", {.dtype = f32, .shape = Shape{-1, 3}}).set_origin(Origin("model.cpp", 4, "data"));
  b.create_var("z", {.dtype = f32, .shape = Shape{-1, 3}}).set_origin(Origin("model.cpp", 6, "fc"));
  Operator op("relu");
  op.set_input("X", {"x"}).set_output("Out", {"y"}).set_origin(Origin("model.cpp", 5, "relu"));
  add_op(b, op);
  Scope scope;
  Executor exe;
  CHECK_THROWS_WITH_AS(exe.run(p, scope, {{"x", Tensor::from<float>({1, 2, 3}, {1, 3})}}, {"z"}),
                       "model.cpp:6 (fc): cannot fetch 'z': it has no value after the run", Error);
}
