// tests/ops/slice.cpp: slice with negative and clamped indices against plain loops, grads and errors.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
/// x[b0:e0, b1:e1, b2:e2] of a 3-D tensor.
Tensor naive_box(const Tensor& x, std::array<int64_t, 3> b, std::array<int64_t, 3> e) {
  const Shape& s = x.shape();
  std::vector<double> out;
  for (int64_t i = b[0]; i < e[0]; ++i)
    for (int64_t j = b[1]; j < e[1]; ++j)
      for (int64_t k = b[2]; k < e[2]; ++k) out.push_back(x.get((i * s[1] + j) * s[2] + k));
  return Tensor::from<double>(out, Shape{e[0] - b[0], e[1] - b[1], e[2] - b[2]});
}
}  // namespace

TEST_CASE_TEMPLATE("slice: matches plain loops, negative indices count from the back, ends clamp", T, float, double, int32_t, int64_t) {
  for (int64_t n : {1, 3, 17, 64}) {
    auto x = random_tensor<T>({n, 5, 6}, -9, 9);
    auto o1 = OpTest("slice").input("Input", x).attr("axes", std::vector<int32_t>{1, 2}).attr("starts", std::vector<int32_t>{1, -4})
                  .attr("ends", std::vector<int32_t>{-1, 100}).unknown_batch().run()["Out"];
    check_close(to_f64(o1), naive_box(x, {0, 1, 2}, {n, 4, 6}), 0, 0, "slice 1");
    auto o2 = OpTest("slice").input("Input", x).attr("axes", std::vector<int32_t>{0}).attr("starts", std::vector<int32_t>{-100})
                  .attr("ends", std::vector<int32_t>{1}).run()["Out"];
    check_close(to_f64(o2), naive_box(x, {0, 0, 0}, {1, 5, 6}), 0, 0, "slice 2");
    auto o3 = OpTest("slice").input("Input", x).attr("axes", std::vector<int32_t>{-1}).attr("starts", std::vector<int32_t>{3})
                  .attr("ends", std::vector<int32_t>{2}).run()["Out"];
    CHECK(o3.shape() == Shape{n, 5, 0});  // an empty range
  }
  auto big = random_tensor<T>({400, 30, 7}, -9, 9);
  auto ob = OpTest("slice").input("Input", big).attr("axes", std::vector<int32_t>{0, 2}).attr("starts", std::vector<int32_t>{10, 1})
                .attr("ends", std::vector<int32_t>{390, 6}).run()["Out"];
  check_close(to_f64(ob), naive_box(big, {10, 0, 1}, {390, 30, 6}), 0, 0, "slice big");
}

TEST_CASE("slice: build-time shapes (unknown batch stays unknown when sliced)") {
  auto x = random_tensor<float>({8, 5});
  OpTest t("slice");
  t.input("Input", x).attr("axes", std::vector<int32_t>{1}).attr("starts", std::vector<int32_t>{1}).attr("ends", std::vector<int32_t>{3}).unknown_batch();
  CHECK(t.build().global_block().var("Out_0").shape() == Shape{-1, 2});
  OpTest t0("slice");
  t0.input("Input", x).attr("axes", std::vector<int32_t>{0}).attr("starts", std::vector<int32_t>{1}).attr("ends", std::vector<int32_t>{3}).unknown_batch();
  CHECK(t0.build().global_block().var("Out_0").shape() == Shape{-1, 5});
  CHECK(t0.run()["Out"].shape() == Shape{2, 5});
}

TEST_CASE("slice: grad puts Out@GRAD in the box, zeros elsewhere (f64)") {
  OpTest("slice").input("Input", random_tensor<double>({3, 4, 5})).attr("axes", std::vector<int32_t>{0, 2})
      .attr("starts", std::vector<int32_t>{1, -3}).attr("ends", std::vector<int32_t>{3, 4}).check_grad({"Input"}, {"Out"});
}

TEST_CASE("slice: mismatched lists and bad axes are oar::Errors") {
  auto x = random_tensor<float>({3, 4});
  auto m = error_of([&] { OpTest("slice").input("Input", x).attr("axes", std::vector<int32_t>{0, 1}).attr("starts", std::vector<int32_t>{0})
                              .attr("ends", std::vector<int32_t>{1}).build(); });
  CHECK(m.find("slice") != std::string::npos);
  CHECK(m.find("one length") != std::string::npos);
  auto m2 = error_of([&] { OpTest("slice").input("Input", x).attr("axes", std::vector<int32_t>{2}).attr("starts", std::vector<int32_t>{0})
                               .attr("ends", std::vector<int32_t>{1}).build(); });
  CHECK(m2.find("axes entry = 2 is out of range") != std::string::npos);
  CHECK(m2.find("[3, 4]") != std::string::npos);
  auto m3 = error_of([&] { OpTest("slice").input("Input", x).attr("axes", std::vector<int32_t>{1, -1}).attr("starts", std::vector<int32_t>{0, 0})
                               .attr("ends", std::vector<int32_t>{1, 1}).build(); });
  CHECK(m3.find("sliced twice") != std::string::npos);
}
