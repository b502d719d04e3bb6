// tests/ops/random.cpp: uniform_random, gaussian_random and truncated_gaussian_random: statistics over 100k
// samples, seeds (same seed -> same tensor, different seeds or seed 0 -> different tensors).
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
struct Stats {
  double mean = 0, sd = 0, lo = INFINITY, hi = -INFINITY;
};
Stats stats(const Tensor& t) {
  Stats s;
  double n = double(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.get(i);
    s.mean += v / n;
    s.lo = std::min(s.lo, v);
    s.hi = std::max(s.hi, v);
  }
  for (int64_t i = 0; i < t.numel(); ++i) s.sd += (t.get(i) - s.mean) * (t.get(i) - s.mean) / n;
  s.sd = std::sqrt(s.sd);
  return s;
}
Tensor draw(const std::string& op, int32_t dtype, int seed, std::map<std::string, float> attrs = {}, std::vector<int64_t> shape = {200, 500}) {
  OpTest t(op);
  t.attr("shape", shape).attr("dtype", dtype).attr("seed", seed);
  for (auto& [k, v] : attrs) t.attr(k, v);
  return t.run()["Out"];
}
bool same(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape()) return false;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (a.get(i) != b.get(i)) return false;
  return true;
}
}  // namespace

TEST_CASE("uniform_random: 100k samples are uniform on [min, max)") {
  for (int32_t dt : {5, 6}) {
    auto t = draw("uniform_random", dt, 3, {{"min", -2.0f}, {"max", 5.0f}}, {100, 1000});
    CHECK(t.dtype() == DType(dt));
    CHECK(t.shape() == Shape{100, 1000});
    Stats s = stats(t);
    // U(a, b): mean (a+b)/2 = 1.5, sd (b-a)/sqrt(12) = 2.0207; the sample mean's sd is 2.02/sqrt(1e5) = 0.0064.
    CHECK(std::abs(s.mean - 1.5) < 0.03);
    CHECK(std::abs(s.sd - 7.0 / std::sqrt(12.0)) < 0.02);
    CHECK(s.lo >= -2.0);
    CHECK(s.hi < 5.0);
    CHECK(s.lo < -1.99);
    CHECK(s.hi > 4.99);
    // Each tenth of the range holds about 10%.
    std::vector<int> bins(10, 0);
    for (int64_t i = 0; i < t.numel(); ++i) bins[size_t(std::min(9.0, (t.get(i) + 2.0) / 0.7))]++;
    for (int b : bins) CHECK(std::abs(b - 10000) < 500);
  }
}

TEST_CASE("gaussian_random: 100k samples have the mean and std asked for") {
  for (int32_t dt : {5, 6}) {
    auto t = draw("gaussian_random", dt, 11, {{"mean", 3.0f}, {"std", 0.5f}});
    Stats s = stats(t);
    CHECK(std::abs(s.mean - 3.0) < 0.01);
    CHECK(std::abs(s.sd - 0.5) < 0.01);
    int within1 = 0;
    for (int64_t i = 0; i < t.numel(); ++i) within1 += std::abs(t.get(i) - 3.0) <= 0.5;
    CHECK(std::abs(within1 / 1e5 - 0.6827) < 0.01);  // the normal's one-sigma mass
    CHECK(s.lo < 3.0 - 3 * 0.5);  // tails exist
  }
}

TEST_CASE("truncated_gaussian_random: every value within 2 std, moments of the truncated normal") {
  for (int32_t dt : {5, 6}) {
    auto t = draw("truncated_gaussian_random", dt, 5, {{"mean", -1.0f}, {"std", 2.0f}});
    Stats s = stats(t);
    CHECK(s.lo >= -1.0 - 4.0 - 1e-5);
    CHECK(s.hi <= -1.0 + 4.0 + 1e-5);
    CHECK(std::abs(s.mean + 1.0) < 0.02);
    // sd of N(0,1) truncated to [-2, 2] is 0.8796.
    CHECK(std::abs(s.sd - 2.0 * 0.8796) < 0.02);
    CHECK(s.lo < -4.9);
    CHECK(s.hi > 2.9);
  }
}

TEST_CASE("random ops: the same nonzero seed gives the same tensor, another seed another one") {
  for (const char* op : {"uniform_random", "gaussian_random", "truncated_gaussian_random"}) {
    auto a = draw(op, 5, 42, {}, {1000});
    auto b = draw(op, 5, 42, {}, {1000});
    auto c = draw(op, 5, 43, {}, {1000});
    CHECK_MESSAGE(same(a, b), op);
    CHECK_MESSAGE(!same(a, c), op);
    // A prefix does not depend on the tensor's size (counter-based), nor on threads.
    auto big = draw(op, 5, 42, {}, {100000});
    for (int64_t i = 0; i < 1000; ++i) REQUIRE(big.get(i) == a.get(i));
  }
}

TEST_CASE("random ops: seed 0 follows the executor's seed (a new tensor every run, repeatable per executor seed)") {
  Program p = OpTest("gaussian_random").attr("shape", std::vector<int64_t>{64}).build();
  auto run2 = [&](uint64_t seed) {
    Scope scope;
    Executor exe(cpu(), seed);
    auto r1 = exe.run(p, scope, {}, {"Out_0"})[0];
    auto r2 = exe.run(p, scope, {}, {"Out_0"})[0];
    return std::make_pair(Tensor(r1).clone(), Tensor(r2).clone());
  };
  auto [a1, a2] = run2(7);
  auto [b1, b2] = run2(7);
  auto [c1, c2] = run2(8);
  CHECK(!same(a1, a2));
  CHECK(same(a1, b1));
  CHECK(same(a2, b2));
  CHECK(!same(a1, c1));
}

TEST_CASE("random ops: empty shapes work, bad attributes are oar::Errors") {
  CHECK(draw("uniform_random", 5, 1, {}, {0, 3}).numel() == 0);
  auto m = error_of([] { OpTest("uniform_random").attr("shape", std::vector<int64_t>{3}).attr("min", 2.0f).attr("max", 1.0f).build(); });
  CHECK(m.find("uniform_random") != std::string::npos);
  CHECK(m.find("min = 2") != std::string::npos);
  auto m2 = error_of([] { OpTest("gaussian_random").attr("shape", std::vector<int64_t>{3}).attr("dtype", 3).build(); });
  CHECK(m2.find("dtype") != std::string::npos);
  auto m3 = error_of([] { OpTest("gaussian_random").attr("shape", std::vector<int64_t>{3}).attr("std", -1.0f).build(); });
  CHECK(m3.find("std") != std::string::npos);
}
