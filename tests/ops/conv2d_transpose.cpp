// tests/ops/conv2d_transpose.cpp: conv2d_transpose through the op harness: forward against a plain scatter
// loop, output_size, grads against finite differences, error texts.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {

struct TCase {
  int64_t n, c, h, w, m, kh, kw;  // m: output channels (Filter is [c, m/groups, kh, kw])
  int s0, s1, p0, p1, d0, d1, groups;
  int oh = 0, ow = 0;  // output_size, 0: none
};

/// Output[n, m, i*s0 - p0 + a*d0, j*s1 - p1 + b*d1] += Input[n, c, i, j] * Filter[c, m - g*M/G, a, b]
Tensor naive_conv2d_transpose(const Tensor& x, const Tensor& f, const TCase& k) {
  int64_t oh = k.oh ? k.oh : (k.h - 1) * k.s0 - 2 * k.p0 + k.d0 * (k.kh - 1) + 1;
  int64_t ow = k.ow ? k.ow : (k.w - 1) * k.s1 - 2 * k.p1 + k.d1 * (k.kw - 1) + 1;
  int64_t cg = k.c / k.groups, mg = k.m / k.groups;
  std::vector<double> out(size_t(k.n * k.m * oh * ow), 0.0);
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t c = 0; c < k.c; ++c)
      for (int64_t i = 0; i < k.h; ++i)
        for (int64_t j = 0; j < k.w; ++j)
          for (int64_t mm = 0; mm < mg; ++mm)
            for (int64_t a = 0; a < k.kh; ++a)
              for (int64_t b = 0; b < k.kw; ++b) {
                int64_t oi = i * k.s0 - k.p0 + a * k.d0, oj = j * k.s1 - k.p1 + b * k.d1;
                if (oi < 0 || oi >= oh || oj < 0 || oj >= ow) continue;
                int64_t m = (c / cg) * mg + mm;
                out[size_t(((n * k.m + m) * oh + oi) * ow + oj)] += x.get(((n * k.c + c) * k.h + i) * k.w + j) * f.get(((c * mg + mm) * k.kh + a) * k.kw + b);
              }
  return Tensor::from<double>(out, {k.n, k.m, oh, ow});
}

OpTest tconv_test(const Tensor& x, const Tensor& f, const TCase& k) {
  OpTest t("conv2d_transpose");
  t.input("Input", x).input("Filter", f);
  t.attr("strides", std::vector<int32_t>{k.s0, k.s1}).attr("paddings", std::vector<int32_t>{k.p0, k.p1});
  t.attr("dilations", std::vector<int32_t>{k.d0, k.d1}).attr("groups", k.groups);
  if (k.oh) t.attr("output_size", std::vector<int32_t>{k.oh, k.ow});
  return t;
}

const std::vector<TCase> kCases = {
    {1, 3, 5, 5, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1},
    {3, 2, 4, 5, 3, 3, 3, 2, 2, 1, 1, 1, 1, 1},        // stride 2, pad 1
    {3, 4, 5, 4, 6, 5, 5, 2, 1, 2, 1, 1, 1, 2},        // 5x5, groups 2
    {1, 2, 4, 4, 4, 3, 3, 1, 1, 2, 2, 2, 2, 2},        // dilation 2, pad 2, groups 2
    {3, 4, 6, 5, 6, 1, 1, 1, 1, 0, 0, 1, 1, 2},        // 1x1 direct path
    {2, 3, 4, 3, 2, 1, 1, 2, 2, 0, 0, 1, 1, 1},        // 1x1 stride 2
    {2, 3, 4, 4, 2, 4, 4, 2, 2, 1, 1, 1, 1, 1},        // the usual 4x4/2 upsampler
    {2, 2, 3, 3, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 6, 6},  // output_size one above the smallest
    {17, 2, 3, 3, 3, 3, 3, 1, 1, 0, 0, 1, 1, 1},       // batch 17
};

}  // namespace

TEST_CASE_TEMPLATE("conv2d_transpose: forward matches a plain loop", T, float, double) {
  double tol = std::is_same_v<T, float> ? 1e-4 : 1e-10;
  int idx = 0;
  for (const auto& k : kCases) {
    CAPTURE(idx);
    auto x = random_tensor<T>({k.n, k.c, k.h, k.w}, -1, 1, 21 + uint64_t(idx));
    auto f = random_tensor<T>({k.c, k.m / k.groups, k.kh, k.kw}, -1, 1, 31 + uint64_t(idx));
    auto out = tconv_test(x, f, k).unknown_batch(idx % 2 == 0).run();
    check_close(to_f64(out["Output"]), naive_conv2d_transpose(x, f, k), tol, tol, "conv2d_transpose case " + std::to_string(idx));
    ++idx;
  }
}

TEST_CASE("conv2d_transpose: is the adjoint of conv2d's input") {
  // <conv2d(x, f), y> == <x, conv2d_transpose(y, f)> for the same Filter and attributes.
  auto x = random_tensor<double>({2, 3, 7, 6}, -1, 1, 1);
  auto f = random_tensor<double>({4, 3, 3, 3}, -1, 1, 2);
  auto y = random_tensor<double>({2, 4, 4, 3}, -1, 1, 3);
  auto attrs = [](OpTest t) {
    return t.attr("strides", std::vector<int32_t>{2, 2}).attr("paddings", std::vector<int32_t>{1, 1}).attr("output_size", std::vector<int32_t>{7, 6});
  };
  auto cx = OpTest("conv2d").input("Input", x).input("Filter", f).attr("strides", std::vector<int32_t>{2, 2}).attr("paddings", std::vector<int32_t>{1, 1}).run();
  auto ty = attrs(OpTest("conv2d_transpose").input("Input", y).input("Filter", f)).run();
  double a = 0, b = 0;
  for (int64_t i = 0; i < y.numel(); ++i) a += cx["Output"].get(i) * y.get(i);
  for (int64_t i = 0; i < x.numel(); ++i) b += x.get(i) * ty["Output"].get(i);
  CHECK(a == doctest::Approx(b).epsilon(1e-12));
}

TEST_CASE("conv2d_transpose: grad matches finite differences (f64)") {
  const std::vector<TCase> cases = {
      {2, 2, 3, 3, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1},
      {2, 2, 3, 4, 4, 3, 3, 2, 2, 1, 0, 1, 1, 2},        // stride 2, groups 2
      {2, 2, 3, 3, 2, 2, 3, 1, 2, 0, 1, 2, 1, 1},        // dilation
      {2, 2, 3, 3, 2, 3, 3, 2, 2, 1, 1, 1, 1, 1, 6, 6},  // output_size
      {2, 4, 3, 3, 2, 1, 1, 1, 1, 0, 0, 1, 1, 2},        // 1x1 direct
  };
  int idx = 0;
  for (const auto& k : cases) {
    CAPTURE(idx);
    auto x = random_tensor<double>({k.n, k.c, k.h, k.w}, -1, 1, 5 + uint64_t(idx));
    auto f = random_tensor<double>({k.c, k.m / k.groups, k.kh, k.kw}, -1, 1, 6 + uint64_t(idx));
    tconv_test(x, f, k).check_grad({"Input", "Filter"}, {"Output"});
    ++idx;
  }
}

TEST_CASE("conv2d_transpose: empty batch does not crash") {
  TCase k{0, 2, 3, 3, 2, 3, 3, 1, 1, 0, 0, 1, 1, 1};
  auto out = tconv_test(Tensor(Shape{0, 2, 3, 3}, f32), random_tensor<float>({2, 2, 3, 3}), k).run();
  CHECK(out["Output"].shape() == Shape{0, 2, 5, 5});
}

TEST_CASE("conv2d_transpose: bad shapes and attributes are oar::Errors naming the shapes") {
  auto x = random_tensor<float>({2, 3, 5, 5});
  auto msg = error_of([&] { OpTest("conv2d_transpose").input("Input", x).input("Filter", random_tensor<float>({4, 2, 3, 3})).build(); });
  test::check_contains(msg, {"conv2d_transpose", "[2, 3, 5, 5]", "[4, 2, 3, 3]"});

  msg = error_of([&] {
    OpTest("conv2d_transpose").input("Input", x).input("Filter", random_tensor<float>({3, 2, 3, 3})).attr("output_size", std::vector<int32_t>{9, 7}).build();
  });
  CHECK(msg.find("output_size") != std::string::npos);
  CHECK(msg.find("[7, 8)") != std::string::npos);

  msg = error_of([&] {
    OpTest("conv2d_transpose").input("Input", random_tensor<float>({1, 1, 1, 1})).input("Filter", random_tensor<float>({1, 1, 1, 1})).attr("paddings", std::vector<int32_t>{1, 1}).build();
  });
  CHECK(msg.find("output size") != std::string::npos);

  msg = error_of([&] { OpTest("conv2d_transpose").input("Input", x).input("Filter", random_tensor<float>({3, 2, 3, 3})).attr("data_format", "NHWC").build(); });
  CHECK(msg.find("NHWC") != std::string::npos);
}
