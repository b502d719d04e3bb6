// tests/ops/position.cpp: add_position_encoding and rotary_position_embedding through the op harness: against a
// plain loop of the formulas, positions per dense row and per LoD sequence, gradients against f64 finite
// differences, and the property rotary embedding exists for: scores depend on relative positions only.
#include "pch.hpp"
#include "support/op_check.hpp"

#include <cmath>

using namespace oar;
using namespace oar::test;

namespace {
double pe(int64_t pos, int64_t k, int64_t D) {
  const int64_t half = D / 2;
  const int64_t i = k < half ? k : k - half;
  const double w = double(pos) * std::pow(10000.0, -double(i) / double(half));
  return k < half ? std::sin(w) : std::cos(w);
}
}  // namespace

TEST_CASE("add_position_encoding: dense rows count t, LoD rows count from their sequence's start") {
  auto x = random_tensor<double>({2, 5, 6}, -1, 1, 3);
  auto out = OpTest("add_position_encoding").input("X", x).attr("alpha", 0.5f).attr("beta", 2.f).run()["Out"];
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 5; ++t)
      for (int64_t k = 0; k < 6; ++k) {
        const int64_t i = (b * 5 + t) * 6 + k;
        CHECK(out.get(i) == doctest::Approx(0.5 * x.get(i) + 2 * pe(t, k, 6)).epsilon(1e-12));
      }
  LoDTensor seq(random_tensor<double>({7, 4}, -1, 1, 4), {{0, 3, 3, 7}});
  auto o2 = OpTest("add_position_encoding").input("X", seq).run()["Out"];
  CHECK(o2.lod() == seq.lod());
  const int64_t start[] = {0, 0, 0, 3, 3, 3, 3};
  for (int64_t r = 0; r < 7; ++r)
    for (int64_t k = 0; k < 4; ++k) CHECK(o2.get(r * 4 + k) == doctest::Approx(seq.get(r * 4 + k) + pe(r - start[r], k, 4)).epsilon(1e-12));
  // f32 too.
  auto xf = random_tensor<float>({1, 3, 8}, -1, 1, 5);
  auto of = OpTest("add_position_encoding").input("X", xf).run()["Out"];
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t k = 0; k < 8; ++k) CHECK(of.get(t * 8 + k) == doctest::Approx(xf.get(t * 8 + k) + pe(t, k, 8)).epsilon(1e-6));
}

TEST_CASE("add_position_encoding: grad is alpha times the output's (f64 finite differences); odd D is an oar::Error") {
  OpTest("add_position_encoding").input("X", random_tensor<double>({2, 3, 4}, -1, 1, 6)).attr("alpha", 0.7f).check_grad({"X"}, {"Out"});
  OpTest("add_position_encoding").input("X", LoDTensor(random_tensor<double>({5, 2}, -1, 1, 7), {{0, 2, 5}})).check_grad({"X"}, {"Out"});
  const std::string msg = error_of([] { OpTest("add_position_encoding").input("X", random_tensor<float>({2, 3, 5})).build(); });
  CHECK(msg.find("must be even") != std::string::npos);
  CHECK(msg.find("[2, 3, 5]") != std::string::npos);
}

TEST_CASE("rotary_position_embedding: pairs rotated by position x frequency; dense and LoD layouts agree") {
  const int64_t B = 2, H = 3, T = 4, d = 6;
  auto x = random_tensor<double>({B, H, T, d}, -1, 1, 8);
  auto out = OpTest("rotary_position_embedding").input("X", x).attr("offset", 2).run()["Out"];
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < d / 2; ++i) {
          const int64_t at = ((b * H + h) * T + t) * d + 2 * i;
          const double a = double(t + 2) * std::pow(10000.0, -2.0 * double(i) / double(d));
          CHECK(out.get(at) == doctest::Approx(x.get(at) * std::cos(a) - x.get(at + 1) * std::sin(a)).epsilon(1e-12));
          CHECK(out.get(at + 1) == doctest::Approx(x.get(at) * std::sin(a) + x.get(at + 1) * std::cos(a)).epsilon(1e-12));
        }
  // The same values laid out [B * T, H, d] as LoD sequences of length T.
  Tensor lodx(Shape{B * T, H, d}, f64, cpu());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < d; ++e) lodx.data<double>()[((b * T + t) * H + h) * d + e] = x.get(((b * H + h) * T + t) * d + e);
  auto o2 = OpTest("rotary_position_embedding").input("X", LoDTensor(lodx, {{0, size_t(T), size_t(2 * T)}})).attr("offset", 2).run()["Out"];
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t e = 0; e < d; ++e) CHECK(o2.get(((b * T + t) * H + h) * d + e) == doctest::Approx(out.get(((b * H + h) * T + t) * d + e)).epsilon(1e-12));
}

TEST_CASE("rotary_position_embedding: a rotated query and key score the same at the same distance") {
  // One head, d = 8: row t of q and k is the same vector u for every t, so q_t . k_s depends on t - s only.
  const int64_t T = 6, d = 8;
  auto u = random_tensor<double>({d}, -1, 1, 9);
  Tensor x(Shape{1, 1, T, d}, f64, cpu());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < d; ++e) x.data<double>()[t * d + e] = u.get(e);
  auto r = OpTest("rotary_position_embedding").input("X", x).run()["Out"];
  auto dot = [&](int64_t t, int64_t s) {
    double a = 0;
    for (int64_t e = 0; e < d; ++e) a += r.get(t * d + e) * r.get(s * d + e);
    return a;
  };
  CHECK(dot(3, 1) == doctest::Approx(dot(5, 3)).epsilon(1e-12));
  CHECK(dot(2, 2) == doctest::Approx(dot(0, 0)).epsilon(1e-12));
  CHECK(std::abs(dot(3, 1) - dot(3, 0)) > 1e-6);  // and it does depend on the distance
}

TEST_CASE("rotary_position_embedding: grad matches finite differences (f64), dense and LoD") {
  OpTest("rotary_position_embedding").input("X", random_tensor<double>({1, 2, 3, 4}, -1, 1, 10)).attr("offset", 1).check_grad({"X"}, {"Out"});
  OpTest("rotary_position_embedding").input("X", LoDTensor(random_tensor<double>({5, 2, 4}, -1, 1, 11), {{0, 2, 5}})).check_grad({"X"}, {"Out"});
  const std::string msg = error_of([] { OpTest("rotary_position_embedding").input("X", random_tensor<float>({2, 3, 4})).build(); });
  CHECK(msg.find("with a LoD") != std::string::npos);
}

TEST_CASE("position ops: Offset starts each sequence (or dense batch row) at its own position; rotary's grad follows it") {
  // LoD: sequence 0 starts at 5, sequence 1 (empty) at 2, sequence 2 at 1.
  LoDTensor seq(random_tensor<double>({6, 4}, -1, 1, 12), {{0, 2, 2, 6}});
  const Tensor off = Tensor::from<int64_t>({5, 2, 1});
  auto o = OpTest("add_position_encoding").input("X", seq).input("Offset", off).run()["Out"];
  const int64_t pos[] = {5, 6, 1, 2, 3, 4};
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t k = 0; k < 4; ++k) CHECK(o.get(r * 4 + k) == doctest::Approx(seq.get(r * 4 + k) + pe(pos[r], k, 4)).epsilon(1e-12));
  // Dense [B, T, D]: batch row b starts at Offset[b].
  auto xd = random_tensor<double>({2, 3, 4}, -1, 1, 13);
  auto od = OpTest("add_position_encoding").input("X", xd).input("Offset", Tensor::from<int64_t>({4, 0})).run()["Out"];
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t k = 0; k < 4; ++k) {
        const int64_t i = (b * 3 + t) * 4 + k;
        CHECK(od.get(i) == doctest::Approx(xd.get(i) + pe(t + (b == 0 ? 4 : 0), k, 4)).epsilon(1e-12));
      }
  // Rotary with Offset = rotary with the offset attribute, sequence by sequence.
  LoDTensor q(random_tensor<double>({3, 2, 4}, -1, 1, 14), {{0, 3}});
  auto a = OpTest("rotary_position_embedding").input("X", q).input("Offset", Tensor::from<int64_t>({7}, Shape{1})).run()["Out"];
  auto b = OpTest("rotary_position_embedding").input("X", q).attr("offset", 7).run()["Out"];
  for (int64_t i = 0; i < a.numel(); ++i) CHECK(a.get(i) == doctest::Approx(b.get(i)).epsilon(1e-12));
  OpTest("rotary_position_embedding").input("X", LoDTensor(random_tensor<double>({5, 2, 4}, -1, 1, 15), {{0, 2, 5}})).input("Offset", Tensor::from<int64_t>({3, 9}))
      .check_grad({"X"}, {"Out"});
  OpTest("rotary_position_embedding").input("X", random_tensor<double>({2, 1, 3, 4}, -1, 1, 16)).input("Offset", Tensor::from<int64_t>({3, 9})).check_grad({"X"}, {"Out"});
  const std::string msg = error_of([&] { OpTest("add_position_encoding").input("X", seq).input("Offset", Tensor::from<int64_t>({1, 2})).run(); });
  CHECK(msg.find("one value per sequence (3)") != std::string::npos);
}
