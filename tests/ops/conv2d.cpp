// tests/ops/conv2d.cpp: conv2d through the op harness: forward against a 7-deep plain loop, grads against
// finite differences, thread-count independence, error texts.
#include "pch.hpp"
#include "support/op_check.hpp"
#include "support/threads.hpp"

#include "kernels/cpu/conv_choice.hpp"  // conv_candidates, conv_choice_report, make_winograd_matrices, winograd_applies

using namespace oar;
using namespace oar::test;

namespace {

struct ConvCase {
  int64_t n, c, h, w, m, kh, kw;
  int s0, s1, p0, p1, d0, d1, groups;
};

/// Output[n, m, i, j] = sum_{c, a, b} Input[n, g*C/G + c, i*s0 - p0 + a*d0, j*s1 - p1 + b*d1] * Filter[m, c, a, b]
Tensor naive_conv2d(const Tensor& x, const Tensor& f, const ConvCase& k) {
  int64_t oh = (k.h + 2 * k.p0 - (k.d0 * (k.kh - 1) + 1)) / k.s0 + 1, ow = (k.w + 2 * k.p1 - (k.d1 * (k.kw - 1) + 1)) / k.s1 + 1;
  int64_t cg = k.c / k.groups, mg = k.m / k.groups;
  std::vector<double> out(size_t(k.n * k.m * oh * ow));
  for (int64_t n = 0; n < k.n; ++n)
    for (int64_t m = 0; m < k.m; ++m)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double s = 0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t a = 0; a < k.kh; ++a)
              for (int64_t b = 0; b < k.kw; ++b) {
                int64_t ih = i * k.s0 - k.p0 + a * k.d0, iw = j * k.s1 - k.p1 + b * k.d1;
                if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                int64_t ci = (m / mg) * cg + c;
                s += x.get(((n * k.c + ci) * k.h + ih) * k.w + iw) * f.get(((m * cg + c) * k.kh + a) * k.kw + b);
              }
          out[size_t(((n * k.m + m) * oh + i) * ow + j)] = s;
        }
  return Tensor::from<double>(out, {k.n, k.m, oh, ow});
}

OpTest conv_test(const Tensor& x, const Tensor& f, const ConvCase& k, const char* type = "conv2d") {
  OpTest t(type);
  t.input("Input", x).input("Filter", f);
  t.attr("strides", std::vector<int32_t>{k.s0, k.s1}).attr("paddings", std::vector<int32_t>{k.p0, k.p1});
  t.attr("dilations", std::vector<int32_t>{k.d0, k.d1}).attr("groups", k.groups);
  return t;
}

const std::vector<ConvCase> kCases = {
    {1, 3, 7, 7, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1},      // plain 3x3
    {3, 2, 9, 8, 4, 3, 3, 2, 2, 1, 1, 1, 1, 1},      // stride 2, pad 1, odd/even sizes
    {3, 4, 11, 9, 6, 5, 5, 1, 2, 2, 1, 1, 1, 2},     // 5x5, groups 2, mixed strides and pads
    {1, 2, 10, 10, 4, 3, 3, 1, 1, 2, 2, 2, 2, 2},    // dilation 2, pad 2, groups 2
    {3, 4, 6, 5, 6, 1, 1, 1, 1, 0, 0, 1, 1, 2},      // 1x1 stride 1, small image: copied side by side
    {3, 4, 12, 12, 6, 1, 1, 1, 1, 0, 0, 1, 1, 2},    // 1x1 stride 1, 144 columns: GEMMs on the images in place, groups 2
    {2, 3, 8, 7, 5, 1, 1, 2, 2, 0, 0, 1, 1, 1},      // 1x1 stride 2 (not direct)
    {2, 3, 5, 5, 2, 3, 1, 2, 1, 1, 0, 1, 2, 1},      // non-square kernel, dilation on one axis
    {3, 1, 28, 28, 20, 5, 5, 1, 1, 0, 0, 1, 1, 1},   // the book net's first layer
    {3, 20, 12, 12, 50, 5, 5, 1, 1, 0, 0, 1, 1, 1},  // and its second
    {1, 2, 3, 3, 3, 3, 3, 1, 1, 0, 0, 1, 1, 1},      // one output pixel
    {17, 3, 6, 6, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},     // batch 17 (uneven thread chunks)
};

}  // namespace

TEST_CASE_TEMPLATE("conv2d and conv2d_fusion: forward matches a plain loop (then + bias, relu)", T, float, double) {
  double tol = std::is_same_v<T, float> ? 1e-4 : 1e-10;
  int idx = 0;
  for (const auto& k : kCases) {
    CAPTURE(idx);
    auto x = random_tensor<T>({k.n, k.c, k.h, k.w}, -1, 1, 11 + uint64_t(idx));
    auto f = random_tensor<T>({k.m, k.c / k.groups, k.kh, k.kw}, -1, 1, 99 + uint64_t(idx));
    const Tensor want = naive_conv2d(x, f, k);
    auto out = conv_test(x, f, k).unknown_batch(idx % 2 == 1).run();
    check_close(to_f64(out["Output"]), want, tol, tol, "conv2d case " + std::to_string(idx));
    // conv2d_fusion: the same convolution, the channel bias added, then relu or nothing.
    auto bias = random_tensor<T>({k.m}, -1, 1, 41 + uint64_t(idx));
    const int64_t plane = want.numel() / std::max<int64_t>(1, k.n * k.m);
    for (const char* act : {"relu", "identity"}) {
      std::vector<double> w = want.to_vector<double>();
      for (size_t i = 0; i < w.size(); ++i) {
        w[i] += bias.get(int64_t(i) / plane % k.m);
        if (std::string(act) == "relu") w[i] = std::max(w[i], 0.0);
      }
      auto fused = conv_test(x, f, k, "conv2d_fusion").input("Bias", bias).attr("activation", std::string(act)).unknown_batch(idx % 2 == 0).run();
      check_close(to_f64(fused["Output"]), Tensor::from<double>(w, want.shape()), tol, tol, std::string("conv2d_fusion ") + act);
    }
    ++idx;
  }
}

TEST_CASE("conv2d: large batch (book net shapes, f32)") {
  ConvCase k{64, 1, 28, 28, 20, 5, 5, 1, 1, 0, 0, 1, 1, 1};
  auto x = random_tensor<float>({k.n, k.c, k.h, k.w}, 0, 1, 5);
  auto f = random_tensor<float>({k.m, 1, 5, 5}, -1, 1, 6);
  auto out = conv_test(x, f, k).unknown_batch().run();
  CHECK(out["Output"].shape() == Shape{64, 20, 24, 24});
  check_close(to_f64(out["Output"]), naive_conv2d(x, f, k), 1e-4, 1e-4, "conv2d book");
}

TEST_CASE("conv2d: grad matches finite differences (f64)") {
  const std::vector<ConvCase> cases = {
      {2, 2, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1},  // pad 1
      {2, 2, 5, 5, 4, 3, 3, 2, 2, 0, 0, 1, 1, 2},  // stride 2, groups 2
      {2, 2, 6, 5, 2, 2, 3, 1, 2, 1, 2, 2, 1, 1},  // dilation, uneven pads
      {2, 4, 4, 4, 2, 1, 1, 1, 1, 0, 0, 1, 1, 2},  // 1x1 stride 1, copied
      {2, 4, 8, 16, 2, 1, 1, 1, 1, 0, 0, 1, 1, 2}, // 1x1 stride 1, 128 columns: in place
      {2, 3, 8, 8, 4, 1, 1, 2, 2, 0, 0, 1, 1, 1},  // 1x1 stride 2 (ResNet's projection shortcut)
  };
  int idx = 0;
  for (const auto& k : cases) {
    CAPTURE(idx);
    auto x = random_tensor<double>({k.n, k.c, k.h, k.w}, -1, 1, 3 + uint64_t(idx));
    auto f = random_tensor<double>({k.m, k.c / k.groups, k.kh, k.kw}, -1, 1, 4 + uint64_t(idx));
    conv_test(x, f, k).check_grad({"Input", "Filter"}, {"Output"});
    ++idx;
  }
  // One input gradient at a time (the other is @EMPTY@ and skipped).
  ConvCase k = cases[0];
  auto x = random_tensor<double>({k.n, k.c, k.h, k.w}, -1, 1, 3);
  auto f = random_tensor<double>({k.m, k.c, k.kh, k.kw}, -1, 1, 4);
  conv_test(x, f, k).check_grad({"Filter"}, {"Output"});
  conv_test(x, f, k).check_grad({"Input"}, {"Output"});
  // The filter gradient alone of small windows over few channels (LeNet's first layer: its input is data):
  // 2 channels 3x3 (K = 18), and 1 channel 5x5 (K = 25).
  for (const ConvCase& d : {ConvCase{3, 2, 6, 5, 3, 3, 3, 1, 1, 0, 0, 1, 1, 1}, ConvCase{2, 1, 9, 8, 4, 5, 5, 1, 1, 0, 0, 1, 1, 1}}) {
    auto xd = random_tensor<double>({d.n, d.c, d.h, d.w}, -1, 1, 8);
    auto fd = random_tensor<double>({d.m, d.c, d.kh, d.kw}, -1, 1, 9);
    conv_test(xd, fd, d).check_grad({"Filter"}, {"Output"});
  }
}

TEST_CASE("conv2d: large images run in blocks of output rows; forward and both gradients match plain loops") {
  // Column matrices above 4 MB (ResNet's stem: 147 x 12544 floats an image) are built a block of output rows at
  // a time: a 7x7 stride-2 stem-like layer (strided path), a 5x5 valid one (dense path) and a grouped one.
  for (const ConvCase& k : {ConvCase{2, 3, 180, 180, 2, 7, 7, 2, 2, 3, 3, 1, 1, 1}, ConvCase{1, 2, 150, 150, 2, 5, 5, 1, 1, 0, 0, 1, 1, 1},
                            ConvCase{1, 4, 120, 120, 2, 5, 5, 1, 1, 2, 2, 1, 1, 2}}) {
    CAPTURE(k.h);
    CAPTURE(k.groups);
    auto x = random_tensor<double>({k.n, k.c, k.h, k.w}, -1, 1, 91);
    auto f = random_tensor<double>({k.m, k.c / k.groups, k.kh, k.kw}, -1, 1, 92);
    const Tensor want = naive_conv2d(x, f, k);
    check_close(conv_test(x, f, k).run()["Output"], want, 1e-10, 1e-10, "blocked forward");
    const int64_t oh = want.shape()[2], ow = want.shape()[3], cg = k.c / k.groups, mg = k.m / k.groups;
    auto dy = random_tensor<double>({k.n, k.m, oh, ow}, -1, 1, 93);
    std::vector<double> dx(size_t(x.numel())), dw(size_t(f.numel()));
    for (int64_t n = 0; n < k.n; ++n)  // the adjoint of naive_conv2d
      for (int64_t m = 0; m < k.m; ++m)
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            const double d = dy.get(((n * k.m + m) * oh + i) * ow + j);
            for (int64_t c = 0; c < cg; ++c)
              for (int64_t a = 0; a < k.kh; ++a)
                for (int64_t b = 0; b < k.kw; ++b) {
                  const int64_t ih = i * k.s0 - k.p0 + a * k.d0, iw = j * k.s1 - k.p1 + b * k.d1;
                  if (ih < 0 || ih >= k.h || iw < 0 || iw >= k.w) continue;
                  const int64_t xi = ((n * k.c + (m / mg) * cg + c) * k.h + ih) * k.w + iw, fi = ((m * cg + c) * k.kh + a) * k.kw + b;
                  dx[size_t(xi)] += d * f.get(fi);
                  dw[size_t(fi)] += d * x.get(xi);
                }
          }
    OpTest t("conv2d_grad");
    t.input("Input", x).input("Filter", f).input("Output@GRAD", dy);
    t.attr("strides", std::vector<int32_t>{k.s0, k.s1}).attr("paddings", std::vector<int32_t>{k.p0, k.p1});
    t.attr("dilations", std::vector<int32_t>{k.d0, k.d1}).attr("groups", k.groups);
    auto got = t.run();
    check_close(got["Input@GRAD"], Tensor::from<double>(dx, x.shape()), 1e-10, 1e-10, "blocked input grad");
    check_close(got["Filter@GRAD"], Tensor::from<double>(dw, f.shape()), 1e-9, 1e-10, "blocked filter grad");
  }
}

TEST_CASE("conv2d: results do not depend on the thread count") {
  ConvCase k{9, 4, 7, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2};
  auto x = random_tensor<double>({k.n, k.c, k.h, k.w}, -1, 1, 1);
  auto f = random_tensor<double>({k.m, 2, 3, 3}, -1, 1, 2);
  auto run_on = [&](int threads) {
    ThreadsForTest held(threads);
    return conv_test(x, f, k).run();
  };
  auto one = run_on(1);
  auto two = run_on(2);
  check_close(one["Output"], two["Output"], 1e-12, 1e-12, "1 vs 2 threads");
}

TEST_CASE("conv2d: empty batch and non-finite values do not crash") {
  ConvCase k{0, 2, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1};
  auto out = conv_test(Tensor(Shape{0, 2, 5, 5}, f32), random_tensor<float>({3, 2, 3, 3}), k).run();
  CHECK(out["Output"].shape() == Shape{0, 3, 5, 5});
  auto x = make_tensor<float>({1, 2, 5, 5}, [](int64_t i) { return i == 3 ? NAN : i == 30 ? INFINITY : 0.5; });
  k.n = 1;
  auto o2 = conv_test(x, random_tensor<float>({3, 2, 3, 3}), k).run();
  CHECK(std::isnan(o2["Output"].get(3)));
  CHECK(std::isfinite(o2["Output"].get(24)));  // the far corner sees neither
}

TEST_CASE("conv2d: bad shapes and attributes are oar::Errors naming the shapes") {
  auto x = random_tensor<float>({2, 3, 5, 5});
  auto msg = error_of([&] { OpTest("conv2d").input("Input", x).input("Filter", random_tensor<float>({4, 2, 3, 3})).build(); });
  test::check_contains(msg, {"conv2d", "[2, 3, 5, 5]", "[4, 2, 3, 3]", "channels"});

  msg = error_of([&] { OpTest("conv2d").input("Input", x).input("Filter", random_tensor<float>({4, 3, 7, 7})).build(); });
  CHECK(msg.find("output size") != std::string::npos);
  CHECK(msg.find("[4, 3, 7, 7]") != std::string::npos);

  msg = error_of([&] { OpTest("conv2d").input("Input", x).input("Filter", random_tensor<float>({4, 3, 3, 3})).attr("data_format", "NHWC").build(); });
  CHECK(msg.find("NHWC") != std::string::npos);
  CHECK(msg.find("[2, 3, 5, 5]") != std::string::npos);

  msg = error_of([&] { OpTest("conv2d").input("Input", x).input("Filter", random_tensor<float>({3, 1, 3, 3})).attr("groups", 3).attr("strides", std::vector<int32_t>{0, 1}).build(); });
  CHECK(msg.find("strides") != std::string::npos);

  msg = error_of([&] { OpTest("conv2d").input("Input", random_tensor<float>({2, 4, 5, 5})).input("Filter", random_tensor<float>({3, 2, 3, 3})).attr("groups", 2).build(); });
  CHECK(msg.find("multiple of groups") != std::string::npos);

  msg = error_of([&] { OpTest("conv2d").input("Input", random_tensor<float>({3, 5, 5})).input("Filter", random_tensor<float>({3, 3, 3, 3})).build(); });
  CHECK(msg.find("[N, C, H, W]") != std::string::npos);
}

TEST_CASE("conv2d_fusion: a bias that does not fit the filter, or an unknown activation, is an oar::Error") {
  auto x = random_tensor<float>({2, 3, 5, 5});
  auto f = random_tensor<float>({4, 3, 3, 3});
  auto msg = error_of([&] { OpTest("conv2d_fusion").input("Input", x).input("Filter", f).input("Bias", random_tensor<float>({5})).build(); });
  CHECK(msg.find("Bias must be [M] = [4]") != std::string::npos);
  CHECK(msg.find("[5]") != std::string::npos);
  msg = error_of([&] {
    OpTest("conv2d_fusion").input("Input", x).input("Filter", f).input("Bias", random_tensor<float>({4})).attr("activation", std::string("gelu")).build();
  });
  CHECK(msg.find("activation") != std::string::npos);
  CHECK(msg.find("identity or relu") != std::string::npos);
}

// ---- Winograd tiles (kernels/cpu/winograd.hpp): F(4x4, 5x5) and F(6x6, 3x3), the gradients as their adjoint.

namespace {

/// Sets the convolution algorithm for one scope.
struct ConvAlgorithmScope {
  ConvAlgorithm before = conv_algorithm();
  explicit ConvAlgorithmScope(ConvAlgorithm a) { set_conv_algorithm(a); }
  ~ConvAlgorithmScope() { set_conv_algorithm(before); }
};

template <int M, int R>
void check_winograd_1d() {
  constexpr auto w = cpu_kernels::make_winograd_matrices<M, R>();
  constexpr int A = M + R - 1;
  auto d = random_tensor<double>({A}, -1, 1, 7), g = random_tensor<double>({R}, -1, 1, 8);
  double gd[A], bd[A];
  for (int j = 0; j < A; ++j) {
    gd[j] = bd[j] = 0;
    for (int k = 0; k < R; ++k) gd[j] += w.g[j][k] * g.get(k);
    for (int k = 0; k < A; ++k) bd[j] += w.bt[j][k] * d.get(k);
  }
  for (int i = 0; i < M; ++i) {
    double y = 0, want = 0;
    for (int j = 0; j < A; ++j) y += w.at[i][j] * gd[j] * bd[j];
    for (int k = 0; k < R; ++k) want += g.get(k) * d.get(i + k);
    CHECK(y == doctest::Approx(want).epsilon(1e-12));
  }
}

/// Winograd's f32 rounding scales with the output's magnitude (its transforms add terms up to ~5x larger than
/// the inputs): compare with an absolute tolerance relative to the largest output.
double max_abs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(t.get(i)));
  return m;
}

const std::vector<ConvCase> kWinogradCases = {
    {3, 20, 12, 12, 50, 5, 5, 1, 1, 0, 0, 1, 1, 1},  // the book net's second layer: 2 x 2 whole tiles
    {2, 8, 9, 10, 9, 5, 5, 1, 1, 2, 1, 1, 1, 1},     // 5x5, uneven pads, partial tiles
    {2, 9, 13, 11, 10, 3, 3, 1, 1, 1, 1, 1, 1, 1},   // 3x3 "same", partial tiles
    {1, 3, 8, 8, 2, 3, 3, 1, 1, 0, 0, 1, 1, 1},      // 3x3 valid: one whole 6 x 6 tile, few channels
    {2, 1, 6, 7, 3, 5, 5, 1, 1, 4, 4, 1, 1, 1},      // padding r - 1 (the widest allowed), one channel
    {17, 2, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1},     // batch 17 (uneven thread chunks)
    {2, 8, 7, 7, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1},      // ResNet's 7 x 7 "same": 2 x 2 small tiles, 2 x 2 large ones mostly empty
    {2, 4, 14, 14, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1},    // ResNet's 14 x 14 "same"
};

}  // namespace

TEST_CASE("winograd: the 1-D transforms compute a correlation (both tile sizes and the filter-gradient pairs)") {
  check_winograd_1d<6, 3>();  // 8 x 8 tiles
  check_winograd_1d<4, 5>();
  check_winograd_1d<5, 4>();
  check_winograd_1d<3, 6>();
  check_winograd_1d<4, 3>();  // 6 x 6 tiles
  check_winograd_1d<2, 5>();
  check_winograd_1d<3, 4>();
  check_winograd_1d<5, 2>();
}

namespace {
cpu_kernels::ConvGeom conv_geom_of(const ConvCase& k) {
  cpu_kernels::ConvGeom g;
  g.c = k.c, g.h = k.h, g.w = k.w, g.kh = k.kh, g.kw = k.kw, g.sh = k.s0, g.sw = k.s1, g.ph = k.p0, g.pw = k.p1, g.dh = k.d0, g.dw = k.d1;
  g.oh = (k.h + 2 * k.p0 - (k.d0 * (k.kh - 1) + 1)) / k.s0 + 1, g.ow = (k.w + 2 * k.p1 - (k.d1 * (k.kw - 1) + 1)) / k.s1 + 1;
  return g;
}

/// The kernels conv_candidates offers for `k` under the current setting.
std::vector<cpu_kernels::ConvKernel> candidates(const ConvCase& k) {
  cpu_kernels::ConvKernel c[3];
  const int nc = cpu_kernels::conv_candidates(conv_geom_of(k), k.m, k.groups, c);
  return {c, c + nc};
}
}  // namespace

TEST_CASE("conv2d: which kernels each setting offers for a shape") {
  using K = cpu_kernels::ConvKernel;
  const ConvCase book1{64, 1, 28, 28, 20, 5, 5, 1, 1, 0, 0, 1, 1, 1}, book2{64, 20, 12, 12, 50, 5, 5, 1, 1, 0, 0, 1, 1, 1};
  const ConvCase r7{16, 512, 7, 7, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1};  // ResNet-18's last stage
  const std::vector<K> all{K::im2col, K::winograd_large, K::winograd_small}, plain{K::im2col};
  CHECK(cpu_kernels::winograd_applies(conv_geom_of(book1), 20, 1));
  CHECK(cpu_kernels::winograd_applies(conv_geom_of(r7), 512, 1));
  for (const ConvCase& k : {ConvCase{8, 64, 14, 14, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1},    // stride 2
                            ConvCase{8, 64, 14, 14, 64, 3, 3, 1, 1, 2, 2, 2, 2, 1},    // dilation 2
                            ConvCase{8, 64, 14, 14, 64, 7, 7, 1, 1, 3, 3, 1, 1, 1},    // 7x7
                            ConvCase{8, 64, 14, 14, 64, 3, 3, 1, 1, 3, 3, 1, 1, 1}}) {  // pad >= r
    CHECK_FALSE(cpu_kernels::winograd_applies(conv_geom_of(k), k.m, k.groups));
    CHECK(candidates(k) == plain);
  }
  CHECK_FALSE(cpu_kernels::winograd_applies(conv_geom_of(book2), 50, 2));  // groups 2
  ConvAlgorithmScope scope(ConvAlgorithm::automatic);
  CHECK(candidates(book1) == plain);  // one input channel: tiles cannot pay
  CHECK(candidates(book2) == all);
  CHECK(candidates(r7) == std::vector<K>{K::im2col, K::winograd_small});  // 8 x 8 of small tiles; 12 x 12 of large ones
  CHECK(candidates(ConvCase{16, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1}) == std::vector<K>{K::im2col, K::winograd_small});  // 18 x 18 of large
  CHECK(candidates(ConvCase{16, 128, 28, 28, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1}) == all);
  CHECK(candidates(ConvCase{8, 64, 3, 3, 64, 3, 3, 1, 1, 0, 0, 1, 1, 1}) == plain);  // a 1 x 1 output
  set_conv_algorithm(ConvAlgorithm::im2col);
  CHECK(candidates(book2) == plain);
  set_conv_algorithm(ConvAlgorithm::winograd);
  CHECK(candidates(book1) == std::vector<K>{K::winograd_large});  // forced: any channel count
  set_conv_algorithm(ConvAlgorithm::winograd_small);
  CHECK(candidates(r7) == std::vector<K>{K::winograd_small});
  CHECK(candidates(ConvCase{8, 64, 14, 14, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1}) == plain);  // where tiles do not apply
}

TEST_CASE("conv2d under automatic: the kernel is timed once per shape and pass, kept, and its results repeat exactly") {
  ConvAlgorithmScope scope(ConvAlgorithm::automatic);
  cpu_kernels::clear_conv_choices();
  const ConvCase k{3, 16, 12, 12, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1};  // all three kernels are candidates
  auto x = random_tensor<float>({k.n, k.c, k.h, k.w}, -1, 1, 81);
  auto f = random_tensor<float>({k.m, k.c, 3, 3}, -1, 1, 82);
  const Tensor want = naive_conv2d(x, f, k);
  auto first = conv_test(x, f, k).run();
  check_close(to_f64(first["Output"]), want, 2e-5 * max_abs(want), 0, "automatic conv2d");
  std::vector<std::string> report = cpu_kernels::conv_choice_report();
  REQUIRE(report.size() == 1);
  CHECK(report[0].find("forward 3 x 16 x 12 x 12 -> 16, 3x3 stride 1 pad 1: ") == 0);
  auto again = conv_test(x, f, k).run();
  check_close(again["Output"], first["Output"], 0, 0, "the same shape again");
  auto dy = random_tensor<float>({k.n, k.m, 12, 12}, -1, 1, 83);
  OpTest t("conv2d_grad");
  t.input("Input", x).input("Filter", f).input("Output@GRAD", dy);
  t.attr("strides", std::vector<int32_t>{1, 1}).attr("paddings", std::vector<int32_t>{1, 1}).attr("dilations", std::vector<int32_t>{1, 1}).attr("groups", 1);
  auto g1 = t.run();
  auto g2 = t.run();
  check_close(g2["Input@GRAD"], g1["Input@GRAD"], 0, 0, "the same backward again (input)");
  check_close(g2["Filter@GRAD"], g1["Filter@GRAD"], 0, 0, "the same backward again (filter)");
  report = cpu_kernels::conv_choice_report();
  CHECK(report.size() == 2);  // the backward pass is chosen on its own
  cpu_kernels::clear_conv_choices();
}

TEST_CASE_TEMPLATE("conv2d and conv2d_fusion on Winograd tiles of both sizes: forward matches a plain loop", T, float, double) {
  for (ConvAlgorithm tiles : {ConvAlgorithm::winograd, ConvAlgorithm::winograd_small}) {
  ConvAlgorithmScope scope(tiles);
  int idx = 0;
  for (const auto& k : kWinogradCases) {
    CAPTURE(idx);
    CAPTURE(int(tiles));
    auto x = random_tensor<T>({k.n, k.c, k.h, k.w}, -1, 1, 21 + uint64_t(idx));
    auto f = random_tensor<T>({k.m, k.c, k.kh, k.kw}, -1, 1, 31 + uint64_t(idx));
    const Tensor want = naive_conv2d(x, f, k);
    const double tol = (std::is_same_v<T, float> ? 2e-5 : 1e-12) * std::max(1.0, max_abs(want));
    auto out = conv_test(x, f, k).unknown_batch(idx % 2 == 1).run();
    check_close(to_f64(out["Output"]), want, tol, 0, "winograd conv2d case " + std::to_string(idx));
    auto bias = random_tensor<T>({k.m}, -1, 1, 41 + uint64_t(idx));
    std::vector<double> w = want.to_vector<double>();
    const int64_t plane = want.numel() / std::max<int64_t>(1, k.n * k.m);
    for (size_t i = 0; i < w.size(); ++i) w[i] = std::max(w[i] + bias.get(int64_t(i) / plane % k.m), 0.0);
    auto fused = conv_test(x, f, k, "conv2d_fusion").input("Bias", bias).attr("activation", std::string("relu")).run();
    check_close(to_f64(fused["Output"]), Tensor::from<double>(w, want.shape()), tol, 0, "winograd conv2d_fusion relu");
    ++idx;
  }
  }
}

TEST_CASE("conv2d on Winograd tiles of both sizes: grads match finite differences (f64)") {
  for (ConvAlgorithm tiles : {ConvAlgorithm::winograd, ConvAlgorithm::winograd_small}) {
  ConvAlgorithmScope scope(tiles);
  CAPTURE(int(tiles));
  const std::vector<ConvCase> cases = {
      {2, 3, 7, 6, 2, 5, 5, 1, 1, 2, 1, 1, 1, 1},  // 5x5, uneven pads, partial tiles
      {2, 2, 7, 8, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1},  // 3x3 "same", partial tiles
      {1, 2, 9, 9, 2, 5, 5, 1, 1, 0, 0, 1, 1, 1},  // 5x5 valid
      {1, 2, 7, 7, 2, 3, 3, 1, 1, 1, 1, 1, 1, 1},  // ResNet's 7 x 7 "same"
  };
  int idx = 0;
  for (const auto& k : cases) {
    CAPTURE(idx);
    auto x = random_tensor<double>({k.n, k.c, k.h, k.w}, -1, 1, 51 + uint64_t(idx));
    auto f = random_tensor<double>({k.m, k.c, k.kh, k.kw}, -1, 1, 61 + uint64_t(idx));
    conv_test(x, f, k).check_grad({"Input", "Filter"}, {"Output"});
    conv_test(x, f, k).check_grad({"Input"}, {"Output"});
    conv_test(x, f, k).check_grad({"Filter"}, {"Output"});
    ++idx;
  }
  }
}

TEST_CASE("conv2d on Winograd tiles: grads agree with im2col's on the book net's second layer (f32, 1 and 2 threads)") {
  ConvCase k{9, 20, 12, 12, 50, 5, 5, 1, 1, 0, 0, 1, 1, 1};
  auto x = random_tensor<float>({k.n, k.c, k.h, k.w}, -1, 1, 71);
  auto f = random_tensor<float>({k.m, k.c, 5, 5}, -1, 1, 72);
  auto dy = random_tensor<float>({k.n, k.m, 8, 8}, -1, 1, 73);
  auto grads = [&](ConvAlgorithm a, int threads) {
    ConvAlgorithmScope scope(a);
    ThreadsForTest held(threads);
    OpTest t("conv2d_grad");
    t.input("Input", x).input("Filter", f).input("Output@GRAD", dy);
    t.attr("strides", std::vector<int32_t>{1, 1}).attr("paddings", std::vector<int32_t>{0, 0});
    t.attr("dilations", std::vector<int32_t>{1, 1}).attr("groups", 1);
    return t.run();
  };
  auto ref = grads(ConvAlgorithm::im2col, 1);
  for (int threads : {1, 2})
  for (ConvAlgorithm tiles : {ConvAlgorithm::winograd, ConvAlgorithm::winograd_small}) {
    CAPTURE(int(tiles));
    auto got = grads(tiles, threads);
    for (const char* slot : {"Input@GRAD", "Filter@GRAD"}) {
      CAPTURE(slot);
      const Tensor want = to_f64(ref[slot]);
      check_close(to_f64(got[slot]), want, 2e-5 * max_abs(want), 0, std::string("winograd vs im2col ") + slot);
    }
  }
}
