// tests/ops/matmul.cpp: matmul: forward against a triple loop for 2-D, batched, broadcast and 1-D operands with every
// transpose combination and alpha; gradients against finite differences; shape errors.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {
/// out = alpha * op(x) op(y) per batch, written over the Fluid shape rules independently of the kernel.
Tensor naive_matmul(const Tensor& x, const Tensor& y, bool tx, bool ty, double alpha, const Shape& out_shape) {
  auto mat = [](const Shape& s, bool is_x, int64_t& b, int64_t& r, int64_t& c) {
    if (s.rank() == 1) {
      b = 0, r = is_x ? 1 : s[0], c = is_x ? s[0] : 1;
    } else {
      b = s.rank() > 2 ? s.numel(0, s.rank() - 2) : 0, r = s[s.rank() - 2], c = s[s.rank() - 1];
    }
  };
  int64_t bx, rx, cx, by, ry, cy;
  mat(x.shape(), true, bx, rx, cx);
  mat(y.shape(), false, by, ry, cy);
  int64_t m = tx ? cx : rx, k = tx ? rx : cx, n = ty ? ry : cy;
  int64_t batch = std::max<int64_t>({bx, by, 1});
  std::vector<double> out(size_t(batch * m * n));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t l = 0; l < k; ++l) {
          int64_t xi = (bx ? b * rx * cx : 0) + (tx ? l * cx + i : i * cx + l);
          int64_t yi = (by ? b * ry * cy : 0) + (ty ? j * cy + l : l * cy + j);
          s += x.get(xi) * y.get(yi);
        }
        out[size_t((b * m + i) * n + j)] = alpha * s;
      }
  return Tensor::from<double>(out, out_shape);
}

struct Case {
  Shape x, y, out;
  bool tx = false, ty = false;
};
const Case cases[] = {
    {{3, 4}, {4, 5}, {3, 5}},
    {{4, 3}, {4, 5}, {3, 5}, true, false},
    {{3, 4}, {5, 4}, {3, 5}, false, true},
    {{4, 3}, {5, 4}, {3, 5}, true, true},
    {{2, 3, 4}, {2, 4, 5}, {2, 3, 5}},          // batched
    {{2, 4, 3}, {2, 5, 4}, {2, 3, 5}, true, true},
    {{2, 3, 4}, {4, 5}, {2, 3, 5}},             // Y shared by the batch
    {{2, 4, 3}, {4, 5}, {2, 3, 5}, true},
    {{2, 3, 4}, {5, 4}, {2, 3, 5}, false, true},
    {{3, 4}, {2, 4, 5}, {2, 3, 5}},             // X shared by the batch
    {{4, 3}, {2, 5, 4}, {2, 3, 5}, true, true},
    {{2, 2, 3, 4}, {2, 2, 4, 5}, {2, 2, 3, 5}}, // two batch dims
    {{4}, {4}, {1}},                            // dot product
    {{4}, {4, 5}, {5}},                         // vector x matrix
    {{3, 4}, {4}, {3}},                         // matrix x vector
    {{2, 3, 4}, {4}, {2, 3}},                   // batch x vector
    {{4}, {2, 4, 5}, {2, 5}},                   // vector x batch
};
}  // namespace

TEST_CASE_TEMPLATE("matmul: every form matches a plain loop", T, float, double) {
  for (const Case& k : cases)
    for (float alpha : {1.0f, 0.5f}) {
      CAPTURE(k.x.str());
      CAPTURE(k.y.str());
      auto x = random_tensor<T>(k.x, -1, 1, 1);
      auto y = random_tensor<T>(k.y, -1, 1, 2);
      auto out = OpTest("matmul").input("X", x).input("Y", y).attr("transpose_X", k.tx).attr("transpose_Y", k.ty).attr("alpha", alpha).run()["Out"];
      REQUIRE(out.shape() == k.out);
      double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
      check_close(to_f64(out), naive_matmul(to_f64(x), to_f64(y), k.tx, k.ty, alpha, k.out), tol, tol, "matmul");
    }
}

TEST_CASE_TEMPLATE("matmul: sizes 1..300 and a large batch", T, float, double) {
  for (int64_t m : {1, 3, 17, 64, 300}) {
    CAPTURE(m);
    auto x = random_tensor<T>({m, 33}, -1, 1, 3);
    auto y = random_tensor<T>({33, 17}, -1, 1, 4);
    double tol = std::is_same_v<T, float> ? 1e-4 : 1e-12;
    check_close(to_f64(OpTest("matmul").input("X", x).input("Y", y).unknown_batch().run()["Out"]),
                naive_matmul(to_f64(x), to_f64(y), false, false, 1, {m, 17}), tol, tol, "matmul");
  }
  auto x = random_tensor<T>({64, 9, 16}, -1, 1, 5);
  auto y = random_tensor<T>({64, 16, 7}, -1, 1, 6);
  double tol = std::is_same_v<T, float> ? 1e-4 : 1e-12;
  check_close(to_f64(OpTest("matmul").input("X", x).input("Y", y).attr("transpose_Y", false).run()["Out"]),
              naive_matmul(to_f64(x), to_f64(y), false, false, 1, {64, 9, 7}), tol, tol, "matmul batched");
}

TEST_CASE("matmul: grads match finite differences (f64, every form)") {
  for (const Case& k : cases) {
    CAPTURE(k.x.str());
    CAPTURE(k.y.str());
    auto t = [&] {
      return OpTest("matmul").input("X", random_tensor<double>(k.x, -1, 1, 7)).input("Y", random_tensor<double>(k.y, -1, 1, 8))
          .attr("transpose_X", k.tx).attr("transpose_Y", k.ty).attr("alpha", 0.5f);
    };
    t().check_grad({"X", "Y"}, {"Out"});
    t().check_grad({"Y"}, {"Out"});
    t().check_grad({"X"}, {"Out"});
  }
}

TEST_CASE("matmul: an empty batch gives empty output and zero grads") {
  auto out = OpTest("matmul").input("X", Tensor(Shape{0, 4}, f32)).input("Y", random_tensor<float>({4, 3})).run()["Out"];
  CHECK(out.shape() == Shape{0, 3});
}

TEST_CASE("matmul: mismatched shapes are an oar::Error naming them") {
  auto inner = error_of([] { OpTest("matmul").input("X", random_tensor<float>({3, 4})).input("Y", random_tensor<float>({5, 2})).build(); });
  test::check_contains(inner, {"matmul", "[3, 4]", "[5, 2]"});
  auto trans = error_of([] {
    OpTest("matmul").input("X", random_tensor<float>({3, 4})).input("Y", random_tensor<float>({3, 2})).attr("transpose_X", false).build();
  });
  CHECK(trans.find("4 columns") != std::string::npos);
  auto batch = error_of([] { OpTest("matmul").input("X", random_tensor<float>({2, 3, 4})).input("Y", random_tensor<float>({3, 4, 5})).build(); });
  CHECK(batch.find("batch") != std::string::npos);
  CHECK(batch.find("[2, 3, 4]") != std::string::npos);
}
