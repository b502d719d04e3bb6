// tests/runtime/runtime.cpp: Tensor storage and views, LoD validity, Scope lookup, and the Executor's
// feed/fetch checks, kernel errors and buffer reuse.
#include "pch.hpp"

using namespace oar;

TEST_CASE("tensor: typed access checks the dtype; views share storage; resize reuses it") {
  auto t = Tensor::from<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(t.numel() == 6);
  CHECK(reinterpret_cast<uintptr_t>(t.raw()) % 64 == 0);
  CHECK_THROWS_WITH_AS(t.data<double>(), "tensor holds f32, not f64", Error);
  Tensor v = t.view({3, 2});
  v.data<float>()[0] = 9;
  CHECK(t.data<float>()[0] == 9);
  Tensor row = t.slice(1, 2);
  CHECK(row.shape() == Shape{1, 3});
  CHECK(row.data<float>()[0] == 4);
  CHECK_THROWS_AS(t.view({4, 2}), Error);
  Tensor c = t.clone();
  c.data<float>()[1] = 7;
  CHECK(t.data<float>()[1] == 2);
  Tensor own(Shape{4, 4}, f32);
  void* before = own.raw();
  own.resize({2, 8}, f32);
  CHECK(own.raw() == before);  // same size: no allocation
  Tensor shared = own;
  own.resize({2, 8}, f32);
  CHECK(own.raw() != before);  // storage shared with `shared`: a fresh buffer, `shared` keeps its data
}

TEST_CASE("lod: offsets start at 0, increase, and the last level ends at the rows") {
  LoDTensor t(Tensor::from<float>({1, 2, 3, 4, 5, 6}, {6, 1}));
  t.set_lod({{0, 3, 4, 6}});
  CHECK(t.lod_level() == 1);
  t.set_lod({{0, 2, 3}, {0, 3, 4, 6}});
  CHECK_THROWS_AS(t.set_lod({{1, 3, 6}}), Error);
  CHECK_THROWS_AS(t.set_lod({{0, 4, 3, 6}}), Error);
  CHECK_THROWS_AS(t.set_lod({{0, 3, 5}}), Error);
  CHECK_THROWS_WITH_AS(t.set_lod({{0, 2, 5}, {0, 3, 4, 6}}), doctest::Contains("level 0 ends at 5"), Error);
}

TEST_CASE("scope: var creates locally; find walks up; kids drop") {
  Scope root;
  root.var("w").tensor() = Tensor::from<float>({1, 2});
  Scope& kid = root.new_scope();
  CHECK(kid.find("w") == root.find("w"));
  CHECK(kid.find_local("w") == nullptr);
  kid.var("tmp");
  CHECK(root.find("tmp") == nullptr);
  CHECK_THROWS_WITH_AS(root.tensor("nothing"), "no variable 'nothing' in the scope", Error);
  root.drop_kids();
  CHECK(root.num_kids() == 0);
}

TEST_CASE("executor: feed checks, missing feeds, unknown fetches, kernel errors name the op and line") {
  Program p;
  Block& b = p.global_block();
  b.create_var("x", {.dtype = f32, .shape = Shape{-1, 3}}).set_origin(Origin("model.cpp", 4, "data"));
  Operator op("relu");
  op.set_input("X", {"x"}).set_output("Out", {"y"}).set_origin(Origin("model.cpp", 5, "relu"));
  add_op(b, op);
  Scope scope;
  Executor exe;
  auto x = Tensor::from<float>({-1, 2, -3, 4, -5, 6}, {2, 3});
  auto out = exe.run(p, scope, {{"x", x}}, {"y"});
  CHECK(out[0].get(3) == 4);
  CHECK_THROWS_WITH_AS(exe.run(p, scope, {{"x", Tensor::from<float>({1, 2}, {1, 2})}}, {"y"}),
                       "model.cpp:4 (data): feed 'x': expected f32 [?, 3], got f32 [1, 2]", Error);
  CHECK_THROWS_WITH_AS(exe.run(p, scope, {{"x", Tensor::from<double>({1, 2, 3}, {1, 3})}}, {"y"}), doctest::Contains("got f64 [1, 3]"), Error);
  CHECK_THROWS_WITH_AS(exe.run(p, scope, {}, {"y"}), doctest::Contains("missing feed 'x'"), Error);
  CHECK_THROWS_WITH_AS(exe.run(p, scope, {{"x", x}}, {"nope"}), doctest::Contains("cannot fetch 'nope'"), Error);
  CHECK_THROWS_WITH_AS(exe.run(p, scope, {{"nope", x}}, {"y"}), doctest::Contains("feed 'nope': no such variable"), Error);

  // A dtype without a kernel: the error names the op, the place, the dtype and what exists.
  Program q;
  q.global_block().create_var("i", {.dtype = i64, .shape = Shape{2, 2}});
  Operator m("mul");
  m.set_input("X", {"i"}).set_input("Y", {"i"}).set_output("Out", {"o"}).set_origin(Origin("model.cpp", 9, "fc"));
  validate_op(m);
  q.global_block().append_op(m);
  q.global_block().create_var("o", {.dtype = i64});
  std::string msg;
  try {
    exe.run(q, scope, {{"i", Tensor::from<int64_t>({1, 2, 3, 4}, {2, 2})}}, {"o"});
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("model.cpp:9 (fc)") != std::string::npos);
  CHECK(msg.find("no mul kernel on cpu for dtype i64 (kernels exist for: f32, f64)") != std::string::npos);
}

TEST_CASE("executor: a prepared block allocates nothing when shapes repeat") {
  Program p;
  Block& b = p.global_block();
  b.create_var("x", {.dtype = f32, .shape = Shape{-1, 64}});
  std::string cur = "x";
  for (int i = 0; i < 10; ++i) {
    Operator op(i % 2 ? "relu" : "tanh");
    std::string next = "h" + std::to_string(i);
    op.set_input("X", {cur}).set_output("Out", {next});
    add_op(b, op);
    cur = next;
  }
  Scope scope;
  Executor exe;
  auto prepared = exe.prepare(p, scope);
  auto x = Tensor::from<float>(std::vector<float>(32 * 64, 0.5f), {32, 64});
  exe.run(*prepared, scope, {{"x", x}}, {});
  int64_t allocs = memory_stats().allocations.load();
  for (int r = 0; r < 5; ++r) exe.run(*prepared, scope, {{"x", x}}, {});
  CHECK(memory_stats().allocations.load() == allocs);
  CHECK(memory_stats().peak.load() >= 10 * 32 * 64 * 4);
}
