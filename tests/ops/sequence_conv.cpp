// tests/ops/sequence_conv.cpp: sequence_conv against a plain loop (windows that stop at each sequence's ends,
// empty and length-1 sequences, several context starts and lengths), its X and Filter gradients by finite
// differences, the LoD and attribute errors, and the sequence_conv layer (filter, bias, context_start) in a model.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {

/// out[r, m] = sum over taps j and columns k of x[r + start + j, k] * w[j * D + k, m], for rows r + start + j
/// inside r's sequence of `offs`; in double.
Tensor naive_sequence_conv(const Tensor& x, const std::vector<size_t>& offs, const Tensor& w, int start, int len) {
  const int64_t n = x.dim(0), d = x.dim(1), m = w.dim(1);
  std::vector<double> out(size_t(n * m), 0.0);
  for (size_t s = 0; s + 1 < offs.size(); ++s)
    for (int64_t r = int64_t(offs[s]); r < int64_t(offs[s + 1]); ++r)
      for (int j = 0; j < len; ++j) {
        const int64_t src = r + start + j;
        if (src < int64_t(offs[s]) || src >= int64_t(offs[s + 1])) continue;
        for (int64_t k = 0; k < d; ++k)
          for (int64_t o = 0; o < m; ++o) out[size_t(r * m + o)] += x.get(src * d + k) * w.get((j * d + k) * m + o);
      }
  return Tensor::from<double>(out, Shape{n, m});
}

/// Offsets of sequences of the given lengths.
std::vector<size_t> offsets_of(const std::vector<size_t>& lens) {
  std::vector<size_t> o{0};
  for (size_t l : lens) o.push_back(o.back() + l);
  return o;
}

}  // namespace

TEST_CASE_TEMPLATE("sequence_conv: forward matches a plain loop; windows stop at each sequence's ends", T, float, double) {
  const std::vector<std::vector<size_t>> batches{{3, 1, 2}, {2, 0, 3, 1}, {1}, {0, 4, 0}, {5}, {1, 1, 1, 1}};
  uint64_t seed = 1;
  for (auto& lens : batches)
    for (auto [start, len] : {std::pair{-1, 3}, {0, 1}, {-2, 4}, {1, 2}, {0, 3}, {-3, 2}}) {
      auto offs = offsets_of(lens);
      const int64_t n = int64_t(offs.back()), d = 3, m = 4;
      auto x = random_tensor<T>({n, d}, -1, 1, seed++);
      auto w = random_tensor<T>({len * d, m}, -1, 1, seed++);
      CAPTURE(start);
      CAPTURE(len);
      CAPTURE(n);
      auto out = OpTest("sequence_conv")
                     .input("X", LoDTensor(x, {offs}))
                     .input("Filter", w)
                     .attr("contextLength", len)
                     .attr("contextStart", start)
                     .unknown_batch()
                     .run()["Out"];
      CHECK(out.lod() == LoD{offs});
      check_close(to_f64(out), naive_sequence_conv(x, offs, w, start, len), 1e-5, 1e-5, "sequence_conv");
    }
}

TEST_CASE("sequence_conv: a large batch (parallel gather, one big GEMM) matches the plain loop") {
  std::vector<size_t> lens;
  for (size_t i = 0; i < 97; ++i) lens.push_back((i * 7) % 13);  // includes empty sequences
  auto offs = offsets_of(lens);
  const int64_t n = int64_t(offs.back()), d = 16, m = 24;
  auto x = random_tensor<double>({n, d}, -1, 1, 3);
  auto w = random_tensor<double>({5 * d, m}, -1, 1, 4);
  auto out = OpTest("sequence_conv").input("X", LoDTensor(x, {offs})).input("Filter", w).attr("contextLength", 5).attr("contextStart", -2).run()["Out"];
  check_close(out, naive_sequence_conv(x, offs, w, -2, 5), 1e-10, 1e-10, "sequence_conv");
}

TEST_CASE("sequence_conv: X and Filter grads match finite differences (f64)") {
  for (auto [lens, start, len] : {std::tuple{std::vector<size_t>{3, 1, 2}, -1, 3}, {std::vector<size_t>{2, 0, 4, 1}, -2, 4},
                                  {std::vector<size_t>{1, 3}, 0, 2}, {std::vector<size_t>{4}, 1, 2}}) {
    auto offs = offsets_of(lens);
    const int64_t n = int64_t(offs.back()), d = 2;
    CAPTURE(start);
    CAPTURE(len);
    OpTest("sequence_conv")
        .input("X", LoDTensor(random_tensor<double>({n, d}, -1, 1, 5), {offs}))
        .input("Filter", random_tensor<double>({len * d, 3}, -1, 1, 6))
        .attr("contextLength", len)
        .attr("contextStart", start)
        .check_grad({"X", "Filter"}, {"Out"});
  }
}

TEST_CASE("sequence_conv: only the wanted grad is computed") {
  auto offs = offsets_of({2, 3});
  OpTest t("sequence_conv");
  t.input("X", LoDTensor(random_tensor<double>({5, 2}, -1, 1, 7), {offs})).input("Filter", random_tensor<double>({6, 3}, -1, 1, 8)).attr("contextLength", 3);
  t.check_grad({"Filter"}, {"Out"});
  t.check_grad({"X"}, {"Out"});
}

TEST_CASE("sequence_conv: missing, two-level or bad LoD, a wrong filter and unsupported attributes are oar::Errors") {
  auto x = random_tensor<float>({6, 2});
  auto w = random_tensor<float>({6, 3});
  auto m1 = error_of([&] { OpTest("sequence_conv").input("X", x).input("Filter", w).attr("contextLength", 3).run(); });
  CHECK(m1.find("sequence_conv") != std::string::npos);
  CHECK(m1.find("X ('X_0') has no LoD") != std::string::npos);

  LoDTensor two(x, {{0, 1, 2}, {0, 3, 6}});
  auto m2 = error_of([&] { OpTest("sequence_conv").input("X", two).input("Filter", w).attr("contextLength", 3).run(); });
  CHECK(m2.find("sequence_conv: X must have 1 LoD level(s), got 2") != std::string::npos);

  // A LoD that does not cover X's rows (the tensor shrank after its LoD was set).
  LoDTensor bad(random_tensor<float>({7, 2}), {{0, 3, 7}});
  bad.resize(Shape{6, 2});
  auto m3 = error_of([&] { OpTest("sequence_conv").input("X", bad).input("Filter", w).attr("contextLength", 3).run(); });
  test::check_contains(m3, {"sequence_conv", "bad LoD", "ends at 7 but 6 rows follow"});

  LoDTensor ok(x, {{0, 4, 6}});
  auto m4 = error_of([&] { OpTest("sequence_conv").input("X", ok).input("Filter", random_tensor<float>({5, 3})).attr("contextLength", 3).build(); });
  CHECK(m4.find("Filter has 5 rows, but contextLength * D = 3 * 2 = 6") != std::string::npos);
  auto m5 = error_of([&] { OpTest("sequence_conv").input("X", ok).input("Filter", w).attr("contextLength", 3).attr("paddingTrainable", true).build(); });
  CHECK(m5.find("paddingTrainable") != std::string::npos);
  CHECK(m5.find("not implemented") != std::string::npos);
  auto m6 = error_of([&] { OpTest("sequence_conv").input("X", ok).input("Filter", w).attr("contextLength", 3).attr("contextStride", 2).build(); });
  CHECK(m6.find("contextStride") != std::string::npos);
  auto m7 = error_of([&] { OpTest("sequence_conv").input("X", ok).input("Filter", w).build(); });
  CHECK(m7.find("contextLength") != std::string::npos);
  auto m8 = error_of([&] { OpTest("sequence_conv").input("X", ok).input("Filter", random_tensor<double>({6, 3})).attr("contextLength", 3).build(); });
  CHECK(m8.find("Filter must have X's dtype f32") != std::string::npos);
}

TEST_CASE("sequence_conv: the layer makes a [filter_size * D, M] filter and a bias, context_start defaults to -(filter_size / 2)") {
  Tape tape;
  auto x = data("x", f64, {-1, 3}).lod_level(1);
  auto y = sequence_conv(x, 4, 3).param(ParamAttr("w")).bias(ParamAttr("b").with_initializer(Uniform(-1, 1))).act(oar::tanh);
  auto z = sequence_conv(x, 2, 4).context_start(0).bias(false).name("z");
  Topology t = tape.program({y, z});
  const Block& g = t.main.global_block();
  CHECK(g.var("w").shape() == Shape{9, 4});
  CHECK(g.var(t.outputs[0]).shape() == Shape{-1, 4});
  CHECK(g.var(t.outputs[0]).lod_level() == 1);
  std::vector<const Operator*> convs;
  for (auto* op : g.ops())
    if (op->type() == "sequence_conv") convs.push_back(op);
  REQUIRE(convs.size() == 2);
  CHECK(convs[0]->attr<int32_t>("contextStart") == -1);
  CHECK(convs[0]->attr<int32_t>("contextLength") == 3);
  CHECK(convs[1]->attr<int32_t>("contextStart") == 0);
  CHECK(convs[1]->attr<int32_t>("contextLength") == 4);
  CHECK(op_types(t.main) == std::vector<std::string>{"sequence_conv", "elementwise_add", "tanh", "sequence_conv"});

  Scope scope;
  Executor exe;
  exe.run(t.startup, scope);
  const Tensor w = scope.find("w")->tensor(), b = scope.find("b")->tensor();
  const std::vector<size_t> offs{0, 2, 2, 3, 7};
  auto xv = random_tensor<double>({7, 3}, -1, 1, 9);
  auto out = exe.run(t.main, scope, {{"x", LoDTensor(xv, {offs})}}, t.outputs);
  Tensor ref = naive_sequence_conv(xv, offs, w, -1, 3);
  REQUIRE(out[0].shape() == Shape{7, 4});
  CHECK(out[0].lod() == LoD{offs});
  for (int64_t i = 0; i < 28; ++i) CHECK(out[0].get(i) == doctest::Approx(std::tanh(ref.get(i) + b.get(i % 4))).epsilon(1e-12));
  check_close(out[1], naive_sequence_conv(xv, offs, scope.find("z.w_0")->tensor(), 0, 4), 1e-12, 1e-12, "z");
}

TEST_CASE("sequence_conv: the layer refuses a non-matrix input and bad sizes") {
  Tape tape;
  auto x = data("x", f32, {-1, 3, 2}).lod_level(1);
  auto y = sequence_conv(x, 4);
  CHECK_THROWS_WITH_AS(tape.program(y), doctest::Contains("sequence_conv: input x must be [N, D] with a known D, got [?, 3, 2]"), Error);
  CHECK_THROWS_WITH_AS(sequence_conv(x, 0), doctest::Contains("num_filters and filter_size must be positive"), Error);
}

TEST_CASE("sequence_conv_pool: sequence_conv + bias + sigmoid, then the max of each sequence (Fluid's nets.sequence_conv_pool)") {
  Tape tape;
  auto x = data("x", f64, {-1, 3}).lod_level(1);
  auto y = sequence_conv_pool(x, 4, 3);
  Topology t = tape.program(y);
  CHECK(op_types(t.main) == std::vector<std::string>{"sequence_conv", "elementwise_add", "sigmoid", "sequence_pool"});
  CHECK(t.main.global_block().var(t.outputs[0]).shape() == Shape{-1, 4});
  CHECK(t.main.global_block().var(t.outputs[0]).lod_level() == 0);
  Scope scope;
  Executor exe;
  exe.run(t.startup, scope);
  const std::vector<size_t> offs{0, 2, 3, 7};
  auto xv = random_tensor<double>({7, 3}, -1, 1, 19);
  auto out = exe.run(t.main, scope, {{"x", LoDTensor(xv, {offs})}}, t.outputs);
  Tensor w;
  for (auto& n : scope.local_names())
    if (n.find(".w_") != std::string::npos) w = scope.find(n)->tensor();
  Tensor ref = naive_sequence_conv(xv, offs, w, -1, 3);  // the bias starts at zero
  REQUIRE(out[0].shape() == Shape{3, 4});
  for (size_t s = 0; s + 1 < offs.size(); ++s)
    for (int64_t j = 0; j < 4; ++j) {
      double best = -1e300;
      for (size_t r = offs[s]; r < offs[s + 1]; ++r) best = std::max(best, 1 / (1 + std::exp(-ref.get(int64_t(r) * 4 + j))));
      CHECK(out[0].get(int64_t(s) * 4 + j) == doctest::Approx(best).epsilon(1e-12));
    }
}
