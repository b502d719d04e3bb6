// tests/runtime/runtime.cpp: Tensor storage and views, LoD validity, Scope lookup, and the Executor's
// feed/fetch checks, kernel errors and buffer reuse.
#include "pch.hpp"
#include "support/heap.hpp"
#include "support/op_check.hpp"

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

TEST_CASE("pinned_size_class: a block at least as large as asked, at most 1/8 larger past 4 KiB, eight classes per power of two") {
  CHECK(detail::pinned_size_class(0) == 4096);
  CHECK(detail::pinned_size_class(1) == 4096);
  CHECK(detail::pinned_size_class(4096) == 4096);
  CHECK(detail::pinned_size_class(4097) == 4096 + 512);
  CHECK(detail::pinned_size_class(8192) == 8192);
  CHECK(detail::pinned_size_class(512 * 784 * 4) == 13 * (size_t(1) << 17));  // a 1.53 MiB batch: 1.625 MiB
  size_t last = 0;
  std::set<size_t> classes;
  for (size_t b = 1; b <= (size_t(1) << 24); b += 1 + b / 97) {
    const size_t c = detail::pinned_size_class(b);
    CHECK(c >= b);
    CHECK(c >= last);  // monotone
    if (b > 4096) CHECK(double(c) <= 1.125 * double(b));
    CHECK(detail::pinned_size_class(c) == c);  // a class serves itself
    last = c;
    if (b > (size_t(1) << 20) && b <= (size_t(1) << 21)) classes.insert(c);
  }
  CHECK(classes.size() <= 8);  // (1 MiB, 2 MiB]: 1 MiB + k/8 MiB, k = 1 .. 8
  // Sizes no system can pin come back as asked (the allocation then fails), never a wrapped or endless count.
  CHECK(detail::pinned_size_class(size_t(1) << 62) == size_t(1) << 62);
  CHECK(detail::pinned_size_class((size_t(1) << 62) + 1) == (size_t(1) << 62) + 1);
  CHECK(detail::pinned_size_class(SIZE_MAX) == SIZE_MAX);
}

TEST_CASE("RunWindow: at most N runs held; admitting one more waits for the oldest, in order") {
  struct FakeFence {
    int id = 0;
    std::vector<int>* waited = nullptr;
    void wait() const { waited->push_back(id); }
  };
  std::vector<int> waited;
  detail::RunWindow<FakeFence, 3> window;
  for (int run = 1; run <= 7; ++run) {
    window.admit();
    CHECK(window.held() < 3);
    window.hold({run, &waited});
  }
  // Runs 4 .. 7 each waited for the run three before them; runs 5, 6 and 7 are still held.
  CHECK(waited == std::vector<int>{1, 2, 3, 4});
  CHECK(window.held() == 3);
  window.admit();
  CHECK(waited == std::vector<int>{1, 2, 3, 4, 5});
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

namespace {
/// x (f32 [-1, 64]) -> h0 -> h1 -> ... -> h(n-1): op i is `types[i % types.size()]` ("scale" scales by 1.5).
Program chain_program(int n, const std::vector<std::string>& types) {
  Program p;
  Block& b = p.global_block();
  b.create_var("x", {.dtype = f32, .shape = Shape{-1, 64}});
  std::string cur = "x";
  for (int i = 0; i < n; ++i) {
    Operator op(types[size_t(i) % types.size()]);
    if (op.type() == "scale") op.set_attr("scale", 1.5f);
    std::string next = "h" + std::to_string(i);
    op.set_input("X", {cur}).set_output("Out", {next});
    add_op(b, op);
    cur = next;
  }
  return p;
}
}  // namespace

TEST_CASE("executor: a prepared block allocates nothing when shapes repeat") {
  Program p = chain_program(10, {"tanh", "relu"});
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

TEST_CASE("executor: recycled buffers hold the live tensors only, give the same results, and allocate nothing") {
  // x -> 12 chained ops (tanh, relu, scale) on [32, 64]; h5 is fetched mid-chain, h11 at the end.
  Program p = chain_program(12, {"tanh", "relu", "scale"});
  std::vector<float> xv(32 * 64);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = float(i % 97) / 50.0f - 0.9f;
  auto x = Tensor::from<float>(xv, {32, 64});
  const size_t tensor_bytes = 32 * 64 * 4;
  auto held = [](Scope& s) {  // bytes of the temporaries' storage (distinct buffers)
    std::set<const Storage*> seen;
    size_t n = 0;
    for (int i = 0; i < 12; ++i) {
      const LoDTensor& t = s.find("h" + std::to_string(i))->tensor();
      if (t.initialized() && seen.insert(t.storage().get()).second) n += t.storage()->bytes();
    }
    return n;
  };

  Scope plain_scope;
  Executor exe;
  auto plain = exe.prepare(p, plain_scope);
  auto want = exe.run(*plain, plain_scope, {{"x", x}}, {"h5", "h11"});

  Scope scope;
  auto rec = exe.prepare(p, scope);
  rec->recycle_buffers({"h8"});
  auto got = exe.run(*rec, scope, {{"x", x}}, {"h5", "h11"});
  for (int k = 0; k < 2; ++k) CHECK(got[size_t(k)].to_vector<float>() == want[size_t(k)].to_vector<float>());
  got.clear();
  const int64_t allocs = memory_stats().allocations.load();
  for (int r = 0; r < 3; ++r) {
    auto again = exe.run(*rec, scope, {{"x", x}}, {"h5", "h11"});
    CHECK(again[0].to_vector<float>() == want[0].to_vector<float>());
    CHECK(again[1].to_vector<float>() == want[1].to_vector<float>());
  }
  CHECK(memory_stats().allocations.load() == allocs);  // the free list serves every temporary
  // The plain block holds all 12 temporaries; the recycled one the fetched h5 and h11, the kept h8, and the
  // free list (an op's input and output at most are alive besides them).
  CHECK(held(*plain->local_scope()) == 12 * tensor_bytes);  // temporaries live in the block's child scope
  CHECK(held(*rec->local_scope()) == 3 * tensor_bytes);
  CHECK(rec->free_bytes() <= 2 * tensor_bytes);
  CHECK(rec->free_bytes() > 0);
  // h3 (neither kept nor fetched) gave its buffer away and has no value.
  CHECK(!rec->local_scope()->find("h3")->tensor().initialized());
  CHECK(rec->free_bytes() > 0);
}

TEST_CASE("executor: recycling keeps empty temporaries' storage with them, so empty batches allocate nothing") {
  // A batch of 0 rows makes every temporary a 0-byte tensor; the free list must not collect them (no later
  // temporary could use one) nor let each run allocate them anew.
  Program p = chain_program(6, {"tanh", "relu", "scale"});
  Scope scope;
  Executor exe;
  auto rec = exe.prepare(p, scope);
  rec->recycle_buffers({});
  FeedMap feeds{{"x", LoDTensor(Tensor(Shape{0, 64}, f32))}};
  const std::vector<std::string> fetch{"h5"};
  std::vector<LoDTensor> out;
  exe.run(*rec, scope, feeds, fetch, out);
  const int64_t allocs = memory_stats().allocations.load();
  const int64_t heap = oar_test::heap_allocations.load();
  for (int r = 0; r < 5; ++r) {
    exe.run(*rec, scope, feeds, fetch, out);
    CHECK(out.at(0).shape() == Shape{0, 64});
  }
  CHECK(memory_stats().allocations.load() == allocs);
  CHECK(oar_test::heap_allocations.load() == heap);
}

TEST_CASE("profiler: counts every kernel run per op type or per op, only while it lives") {
  Program p = chain_program(6, {"tanh", "relu", "scale"});  // 2 of each
  Scope scope;
  Executor exe;
  auto prepared = exe.prepare(p, scope);
  auto x = Tensor::from<float>(std::vector<float>(4 * 64, 0.5f), {4, 64});
  exe.run(*prepared, scope, {{"x", x}}, {});  // not profiled
  {
    Profiler prof;
    for (int r = 0; r < 3; ++r) exe.run(*prepared, scope, {{"x", x}}, {});
    auto t = prof.times();
    REQUIRE(t.size() == 6);  // three op types, and the runs' "(feed)", "(fetch)" and "(executor)"
    int op_types = 0;
    for (auto& op : t) {
      if (op.op.front() == '(') {
        CHECK(op.calls == 3);  // once per run
        CHECK(op.total_ns >= 0);
        continue;
      }
      ++op_types;
      CHECK(op.calls == 6);  // 2 ops of the type x 3 runs
      CHECK(op.min_ns <= op.max_ns);
      CHECK(op.total_ns >= op.max_ns);
      CHECK(op.average_ns() == doctest::Approx(double(op.total_ns) / 6));
    }
    CHECK(op_types == 3);
    CHECK(t[0].total_ns >= t[1].total_ns);  // largest total first
    std::string r = prof.report();
    test::check_contains(r, {"tanh", "(executor)", "total"});
  }
  {
    Profiler per_op(true);
    exe.run(*prepared, scope, {{"x", x}}, {});
    auto t = per_op.times();
    REQUIRE(t.size() == 9);  // a line per op: "tanh -> h0", ..., and the run's three
    for (auto& op : t) CHECK(op.calls == 1);
    CHECK(per_op.report().find("relu -> h1") != std::string::npos);
  }
  // No live profiler: nothing more is recorded (a new one starts empty).
  exe.run(*prepared, scope, {{"x", x}}, {});
  Profiler fresh;
  CHECK(fresh.times().empty());
}

TEST_CASE("executor: a loaded program whose ops carry Fluid's framework attributes runs; add_op still refuses them") {
  // Fluid saves op_role, op_namescope, use_mkldnn... on its ops. Loading keeps them (no schema check on
  // load) and kernels ignore what they do not read; add_op, which builds ops, reports unknown attributes.
  Program p = chain_program(3, {"tanh", "relu", "scale"});
  Program fluid = p;
  for (auto* op : fluid.global_block().ops()) op->set_attr("op_role", 0).set_attr("use_mkldnn", false).set_attr("op_namescope", std::string("/"));
  Program loaded = parse_program(serialize(fluid));
  CHECK(loaded.global_block().op(0).attr<int32_t>("op_role") == 0);
  auto x = Tensor::from<float>(std::vector<float>(2 * 64, 0.25f), {2, 64});
  Executor exe;
  Scope s1, s2;
  auto want = exe.run(p, s1, {{"x", x}}, {"h2"});
  auto got = exe.run(loaded, s2, {{"x", x}}, {"h2"});
  CHECK(got[0].to_vector<float>() == want[0].to_vector<float>());
  Operator typo("relu");
  typo.set_input("X", {"x"}).set_output("Out", {"y"}).set_attr("use_mkldnn", false);
  std::string msg;
  try {
    add_op(p.global_block(), std::move(typo));
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("unknown attribute 'use_mkldnn'") != std::string::npos);
}

TEST_CASE("executor: conditional_block runs its sub-block only when the condition holds") {
  Tape tape;
  auto x = data("x", f32, {-1, 4});
  auto flag = data("flag", boolean, {1});
  auto y = cond(flag, [&] { return fc(x, 3).act(relu); });
  Model model(tape.program(y));
  auto xv = Tensor::from<float>({0.5f, -1.f, 2.f, 0.25f, -0.5f, 1.5f, -2.f, 1.f}, {2, 4});
  auto flag_of = [](bool v) {
    Tensor t(Shape{1}, boolean);
    t.data<bool>()[0] = v;
    return t;
  };
  // The reference: relu(x W + b) from the model's parameters.
  auto w = model.scope().tensor("fc_0.w_0").to_vector<float>();
  auto bias = model.scope().tensor("fc_0.b_0").to_vector<float>();
  auto xs = xv.to_vector<float>();
  std::vector<float> want(6);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      float acc = bias[size_t(j)];
      for (int k = 0; k < 4; ++k) acc += xs[size_t(i * 4 + k)] * w[size_t(k * 3 + j)];
      want[size_t(i * 3 + j)] = std::max(acc, 0.0f);
    }

  Evaluator ev(model);
  auto on = ev.forward({{"x", xv}, {"flag", flag_of(true)}});
  REQUIRE(on[0].shape() == Shape{2, 3});
  for (int e = 0; e < 6; ++e) CHECK(on[0].get(e) == doctest::Approx(want[size_t(e)]).epsilon(1e-6));

  // False: the sub-block does not run, so a fresh evaluator has no value to fetch.
  Evaluator fresh(model);
  std::string msg;
  try {
    fresh.forward({{"x", xv}, {"flag", flag_of(false)}});
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("has no value after the run") != std::string::npos);
  // A wrong condition type is an error naming the op.
  msg.clear();
  try {
    Tensor two(Shape{2}, boolean);
    two.data<bool>()[0] = two.data<bool>()[1] = true;
    ev.forward({{"x", xv}, {"flag", two}});
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(!msg.empty());
}
