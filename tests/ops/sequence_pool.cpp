// tests/ops/sequence_pool.cpp: sequence_pool through the op harness (every pooltype, empty and length-1
// sequences, multi-level LoD, gradients, bad LoD) and the sequence_pool / first_step / last_step layers.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {

const char* const kPoolTypes[] = {"AVERAGE", "SUM", "SQRT", "MAX", "LAST", "FIRST"};

/// Plain-loop pooling of x's rows over the offsets `seq` (the last LoD level), in double; `arg` gets MAX's rows.
Tensor naive_pool(const Tensor& x, const std::vector<size_t>& seq, const std::string& type, std::vector<int32_t>* arg = nullptr) {
  const int64_t S = int64_t(seq.size()) - 1, D = x.numel() / x.dim(0);
  std::vector<double> out(size_t(S * D), 0.0);
  if (arg) arg->assign(size_t(S * D), -1);
  for (int64_t s = 0; s < S; ++s) {
    const int64_t b = int64_t(seq[size_t(s)]), e = int64_t(seq[size_t(s) + 1]), len = e - b;
    if (len == 0) continue;
    for (int64_t d = 0; d < D; ++d) {
      double sum = 0, mx = -INFINITY;
      int32_t at = -1;
      for (int64_t r = b; r < e; ++r) {
        double v = x.get(r * D + d);
        sum += v;
        if (v > mx) mx = v, at = int32_t(r);
      }
      double v = type == "AVERAGE" ? sum / double(len)
                 : type == "SUM"   ? sum
                 : type == "SQRT"  ? sum / std::sqrt(double(len))
                 : type == "MAX"   ? mx
                 : type == "LAST"  ? x.get((e - 1) * D + d)
                                   : x.get(b * D + d);
      out[size_t(s * D + d)] = v;
      if (arg) (*arg)[size_t(s * D + d)] = at;
    }
  }
  Shape os = x.shape();
  os[0] = S;
  return Tensor::from<double>(out, os);
}

/// Values 0.1 apart in a shuffled order: MAX has no near ties, so central differences never cross one.
Tensor distinct_values(Shape s, uint64_t seed) {
  std::vector<double> v(size_t(s.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1 * double(i) - 1.0;
  std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
  return Tensor::from<double>(v, s);
}

}  // namespace

TEST_CASE_TEMPLATE("sequence_pool: every pooltype matches a plain loop, with empty and length-1 sequences", T, float, double) {
  // 5 sequences: 3 rows, empty, 1 row, 2 rows, empty.
  const LoD lod{{0, 3, 3, 4, 6, 6}};
  auto x = random_tensor<T>({6, 2, 3}, -2, 2, 5);
  for (const char* type : kPoolTypes) {
    CAPTURE(type);
    auto outs = OpTest("sequence_pool").input("X", LoDTensor(x, lod)).attr("pooltype", type).unknown_batch().run();
    std::vector<int32_t> arg;
    check_close(to_f64(outs["Out"]), naive_pool(to_f64(x), lod[0], type, &arg), 1e-6, 1e-5, type);
    CHECK(outs["Out"].lod().empty());  // the only level is dropped
    CHECK(outs["Out"].dtype() == x.dtype());
    if (std::string(type) == "MAX") {
      REQUIRE(outs["MaxIndex"].shape() == Shape{5, 2, 3});
      CHECK(outs["MaxIndex"].template to_vector<int32_t>() == arg);
    } else {
      CHECK(outs["MaxIndex"].shape() == Shape{0});
    }
    // The empty sequences pool to zeros whatever the type.
    for (int64_t d = 0; d < 6; ++d) {
      CHECK(outs["Out"].get(1 * 6 + d) == 0.0);
      CHECK(outs["Out"].get(4 * 6 + d) == 0.0);
    }
  }
}

TEST_CASE("sequence_pool: a 2-level LoD pools the last level and keeps the upper one") {
  // 2 paragraphs of 2 and 1 sentences; sentences of 2, 0, 3 rows.
  const LoD lod{{0, 2, 3}, {0, 2, 2, 5}};
  auto x = random_tensor<double>({5, 4}, -1, 1, 9);
  for (const char* type : kPoolTypes) {
    CAPTURE(type);
    Program p = OpTest("sequence_pool").input("X", LoDTensor(x, lod)).attr("pooltype", type).build();
    CHECK(p.global_block().var("Out_0").lod_level() == 1);
    CHECK(p.global_block().var("Out_0").shape() == Shape{-1, 4});
    auto outs = OpTest("sequence_pool").input("X", LoDTensor(x, lod)).attr("pooltype", type).run();
    check_close(outs["Out"], naive_pool(x, lod[1], type), 1e-12, 1e-12, type);
    CHECK(outs["Out"].lod() == LoD{{0, 2, 3}});
  }
}

TEST_CASE("sequence_pool: X of rank 1 pools scalars") {
  auto x = Tensor::from<double>({1, 5, 2, 7, -1}, {5});
  auto outs = OpTest("sequence_pool").input("X", LoDTensor(x, {{0, 2, 5}})).attr("pooltype", "MAX").run();
  CHECK(outs["Out"].to_vector<double>() == std::vector<double>{5, 7});
  CHECK(outs["MaxIndex"].to_vector<int32_t>() == std::vector<int32_t>{1, 3});
  auto sq = OpTest("sequence_pool").input("X", LoDTensor(x, {{0, 2, 5}})).attr("pooltype", "SQRT").run();
  CHECK(sq["Out"].get(0) == doctest::Approx(6 / std::sqrt(2.0)));
  CHECK(sq["Out"].get(1) == doctest::Approx(8 / std::sqrt(3.0)));
}

TEST_CASE("sequence_pool: the default pooltype is AVERAGE") {
  auto x = Tensor::from<double>({1, 2, 3, 4}, {4, 1});
  auto outs = OpTest("sequence_pool").input("X", LoDTensor(x, {{0, 1, 4}})).run();
  CHECK(outs["Out"].to_vector<double>() == std::vector<double>{1, 3});
}

TEST_CASE("sequence_pool: grad matches finite differences for every pooltype (f64), empty sequences get none") {
  const LoD lod{{0, 3, 3, 4, 7}};
  auto x = distinct_values({7, 3}, 4);
  for (const char* type : kPoolTypes) {
    CAPTURE(type);
    OpTest("sequence_pool").input("X", LoDTensor(x, lod)).attr("pooltype", type).check_grad({"X"}, {"Out"});
    OpTest("sequence_pool").input("X", LoDTensor(x, {{0, 3}, {0, 1, 1, 7}})).attr("pooltype", type).check_grad({"X"}, {"Out"});
  }
}

TEST_CASE("sequence_pool: the grad spreads, routes to the max or to the end rows exactly") {
  // One seed per sequence makes the expected X@GRAD easy to write down.
  auto x = Tensor::from<double>({1, 9, 4, 2, 6}, {5, 1});
  const LoD lod{{0, 3, 3, 5}};
  auto grad_of = [&](const char* type) {
    Program p = OpTest("sequence_pool").input("X", LoDTensor(x, lod)).attr("pooltype", type).build();
    Block& b = p.global_block();
    std::set<std::string> none;
    GradContext gc(b.op(0), b, none);
    for (auto& g : op_def("sequence_pool").grad(gc)) {
      b.create_var("Out_0@GRAD", {.dtype = f64, .shape = Shape{-1, 1}, .lod_level = 0});
      add_op(b, g);
    }
    Scope scope;
    Executor exe;
    auto dx = exe.run(p, scope, {{"X_0", LoDTensor(x, lod)}, {"Out_0@GRAD", LoDTensor(Tensor::from<double>({10, 20, 30}, {3, 1}))}}, {"X_0@GRAD"})[0];
    CHECK(dx.lod() == lod);
    return dx.to_vector<double>();
  };
  using V = std::vector<double>;
  CHECK(grad_of("SUM") == V{10, 10, 10, 30, 30});
  CHECK(grad_of("AVERAGE") == V{10 / 3.0, 10 / 3.0, 10 / 3.0, 15, 15});
  CHECK(grad_of("MAX") == V{0, 10, 0, 0, 30});
  CHECK(grad_of("LAST") == V{0, 0, 10, 0, 30});
  CHECK(grad_of("FIRST") == V{10, 0, 0, 30, 0});
  V sq = grad_of("SQRT");
  CHECK(sq[0] == doctest::Approx(10 / std::sqrt(3.0)));
  CHECK(sq[4] == doctest::Approx(30 / std::sqrt(2.0)));
}

TEST_CASE("sequence_pool: X without LoD, a LoD that does not fit X, or a bad pooltype is an oar::Error naming the op") {
  auto x = random_tensor<float>({4, 2});
  auto no_lod = error_of([&] { OpTest("sequence_pool").input("X", LoDTensor(x)).run(); });
  CHECK(no_lod.find("sequence_pool") != std::string::npos);
  CHECK(no_lod.find("X ('X_0') [4, 2] has no LoD") != std::string::npos);

  // A LoD checked when it was set, then the rows changed under it (as a reused buffer's can).
  LoDTensor bad(random_tensor<float>({4, 2}), {{0, 1, 4}});
  bad.resize(Shape{3, 2});
  auto short_rows = error_of([&] { OpTest("sequence_pool").input("X", bad).run(); });
  CHECK(short_rows.find("sequence_pool") != std::string::npos);
  CHECK(short_rows.find("bad LoD: level 0 ends at 4 but 3 rows follow") != std::string::npos);

  auto type = error_of([&] { OpTest("sequence_pool").input("X", LoDTensor(x, {{0, 4}})).attr("pooltype", "MEDIAN").build(); });
  CHECK(type.find("pooltype") != std::string::npos);
  CHECK(type.find("AVERAGE, SUM, SQRT, MAX, LAST or FIRST") != std::string::npos);

  auto ints = error_of([&] { OpTest("sequence_pool").input("X", LoDTensor(random_tensor<int64_t>({4, 1}, 0, 5), {{0, 4}})).build(); });
  CHECK(ints.find("floating-point") != std::string::npos);
}

TEST_CASE("sequence_pool: the layers pool, take the first and the last step of each sequence") {
  Tape tape;
  auto x = data("x", f32, {-1, 2}).lod_level(1);
  auto mx = sequence_pool(x, SequencePoolType::max);
  auto avg = sequence_pool(x, SequencePoolType::average);
  auto first = sequence_first_step(x);
  auto last = sequence_last_step(x);
  Topology t = tape.program({mx, avg, first, last});
  for (auto& o : t.outputs) {
    CHECK(t.main.global_block().var(o).lod_level() == 0);
    CHECK(t.main.global_block().var(o).shape() == Shape{-1, 2});
  }
  std::vector<std::string> types;
  for (auto* op : t.main.global_block().ops())
    if (op->type() == "sequence_pool") types.push_back(op->attr<std::string>("pooltype"));
  CHECK(types == std::vector<std::string>{"MAX", "AVERAGE", "FIRST", "LAST"});

  Scope scope;
  Executor exe;
  auto xv = Tensor::from<float>({1, -1, 3, 0, 2, 5, 7, 7}, {4, 2});
  auto outs = exe.run(t.main, scope, {{"x", LoDTensor(xv, {{0, 3, 3, 4}})}}, t.outputs);
  using V = std::vector<float>;
  CHECK(outs[0].to_vector<float>() == V{3, 5, 0, 0, 7, 7});
  CHECK(outs[1].to_vector<float>() == V{2, 4.f / 3, 0, 0, 7, 7});
  CHECK(outs[2].to_vector<float>() == V{1, -1, 0, 0, 7, 7});
  CHECK(outs[3].to_vector<float>() == V{2, 5, 0, 0, 7, 7});

  // Fed without LoD: the feed check refuses it before any op runs, naming the variable and the line that declared it.
  auto msg = error_of([&] { exe.run(t.main, scope, {{"x", LoDTensor(xv)}}, t.outputs); });
  CHECK(msg.find("feed 'x': the variable has lod_level 1, the tensor 0 LoD level(s)") != std::string::npos);
  CHECK(msg.find("sequence_pool.cpp:") != std::string::npos);
}
