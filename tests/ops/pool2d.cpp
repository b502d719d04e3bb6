// tests/ops/pool2d.cpp: pool2d through the op harness: max/avg against a plain loop (padding, ceil_mode,
// exclusive, global), grads against finite differences, ties, error texts.
#include "pch.hpp"
#include "support/op_check.hpp"

#include <algorithm>
#include <numeric>

using namespace oar;
using namespace oar::test;

namespace {

struct PCase {
  std::string type;
  int64_t n, c, h, w;
  int k0, k1, s0, s1, p0, p1;
  bool ceil_mode = false, exclusive = true, global = false;
};

/// Fluid's pooling: window rows [i*s - p, i*s - p + k) clipped to [0, H); avg divides by the clipped window
/// size when exclusive, else by k0*k1.
Tensor naive_pool(const Tensor& x, const PCase& q) {
  int64_t k0 = q.global ? q.h : q.k0, k1 = q.global ? q.w : q.k1, p0 = q.global ? 0 : q.p0, p1 = q.global ? 0 : q.p1;
  int64_t s0 = q.global ? 1 : q.s0, s1 = q.global ? 1 : q.s1;
  auto osz = [&](int64_t in, int64_t k, int64_t p, int64_t s) { return q.ceil_mode ? (in - k + 2 * p + s - 1) / s + 1 : (in - k + 2 * p) / s + 1; };
  int64_t oh = q.global ? 1 : osz(q.h, k0, p0, s0), ow = q.global ? 1 : osz(q.w, k1, p1, s1);
  std::vector<double> out(size_t(q.n * q.c * oh * ow));
  for (int64_t n = 0; n < q.n; ++n)
    for (int64_t c = 0; c < q.c; ++c)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          int64_t r0 = std::max<int64_t>(i * s0 - p0, 0), r1 = std::min<int64_t>(i * s0 - p0 + k0, q.h);
          int64_t c0 = std::max<int64_t>(j * s1 - p1, 0), c1 = std::min<int64_t>(j * s1 - p1 + k1, q.w);
          double mx = -INFINITY, sum = 0;
          for (int64_t r = r0; r < r1; ++r)
            for (int64_t cc = c0; cc < c1; ++cc) {
              double v = x.get(((n * q.c + c) * q.h + r) * q.w + cc);
              mx = std::max(mx, v);
              sum += v;
            }
          double div = q.exclusive ? double((r1 - r0) * (c1 - c0)) : double(k0 * k1);
          out[size_t(((n * q.c + c) * oh + i) * ow + j)] = q.type == "max" ? mx : sum / div;
        }
  return Tensor::from<double>(out, {q.n, q.c, oh, ow});
}

OpTest pool_test(const Tensor& x, const PCase& q) {
  OpTest t("pool2d");
  t.input("X", x).attr("pooling_type", q.type).attr("ksize", std::vector<int32_t>{q.k0, q.k1});
  t.attr("strides", std::vector<int32_t>{q.s0, q.s1}).attr("paddings", std::vector<int32_t>{q.p0, q.p1});
  t.attr("ceil_mode", q.ceil_mode).attr("exclusive", q.exclusive).attr("global_pooling", q.global);
  return t;
}

/// Values that are pairwise at least 0.02 apart in a random order (max-pool gradients are then well defined).
Tensor distinct_tensor(Shape s, uint64_t seed) {
  std::vector<int64_t> perm(size_t(s.numel()));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(seed));
  return make_tensor<double>(s, [&](int64_t i) { return double(perm[size_t(i)]) * 0.02 - 1.0; });
}

std::vector<PCase> cases() {
  std::vector<PCase> v;
  for (std::string t : {"max", "avg"}) {
    v.push_back({t, 1, 1, 4, 4, 2, 2, 2, 2, 0, 0});               // the book net's 2x2/2
    v.push_back({t, 3, 2, 7, 6, 3, 3, 1, 1, 1, 1});               // 3x3/1, pad 1, batch 3
    v.push_back({t, 2, 3, 7, 7, 3, 3, 2, 2, 1, 1, true});         // ceil_mode
    v.push_back({t, 2, 3, 7, 8, 3, 2, 2, 3, 1, 1, false, false});  // not exclusive, uneven
    v.push_back({t, 2, 2, 5, 5, 2, 2, 2, 2, 1, 1, true, false});  // ceil + not exclusive
    v.push_back({t, 3, 2, 5, 6, 1, 1, 1, 1, 0, 0, false, true, true});  // global
    v.push_back({t, 17, 3, 9, 9, 3, 3, 3, 3, 0, 0});              // batch 17
    v.push_back({t, 64, 20, 24, 24, 2, 2, 2, 2, 0, 0});           // the book net, full batch
    v.push_back({t, 2, 3, 5, 7, 2, 2, 2, 2, 0, 0});               // 2x2/2 on odd sizes: a last row and column outside every window
  }
  return v;
}

/// Runs pool2d_grad built by pool2d's grad maker with the given Out@GRAD; returns X@GRAD.
Tensor run_pool_grad(const OpTest& t, const Tensor& x, const Tensor& dout) {
  Program p = t.build();
  Block& b = p.global_block();
  const Operator fwd = b.op(0);
  std::set<std::string> ng;
  GradContext gc(fwd, b, ng);
  for (auto& g : op_def("pool2d").grad(gc)) {
    for (auto& n : g.input("Out@GRAD")) b.create_var(n, {.dtype = dout.dtype(), .shape = dout.shape()});
    add_op(b, g);
  }
  Scope scope;
  Executor exe;
  FeedMap feeds;
  feeds["X_0"] = x;
  feeds["Out_0@GRAD"] = dout;
  // Out is an input of pool2d_grad: run the forward op too (it is op 0 of the block).
  return exe.run(p, scope, feeds, {"X_0@GRAD"})[0];
}

}  // namespace

TEST_CASE_TEMPLATE("pool2d: forward matches a plain loop", T, float, double) {
  double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  int idx = 0;
  for (const auto& q : cases()) {
    CAPTURE(idx);
    CAPTURE(q.type);
    auto x = random_tensor<T>({q.n, q.c, q.h, q.w}, -1, 1, 40 + uint64_t(idx));
    auto out = pool_test(x, q).unknown_batch(idx % 2 == 1).run();
    check_close(to_f64(out["Out"]), naive_pool(x, q), tol, tol, "pool2d case " + std::to_string(idx));
    ++idx;
  }
}

TEST_CASE("pool2d: grad matches finite differences (f64)") {
  int idx = 0;
  for (const auto& q : cases()) {
    if (q.n > 3) continue;  // keep the finite differences small
    CAPTURE(idx);
    CAPTURE(q.type);
    auto x = distinct_tensor({q.n, q.c, q.h, q.w}, 50 + uint64_t(idx));
    pool_test(x, q).check_grad({"X"}, {"Out"});
    ++idx;
  }
}

TEST_CASE("pool2d: max sends the gradient to the first maximum of a tie") {
  PCase q{"max", 1, 1, 2, 4, 2, 2, 2, 2, 0, 0};
  auto x = Tensor::from<double>({1, 3, 5, 5, 3, 1, 5, 2}, {1, 1, 2, 4});
  auto dx = run_pool_grad(pool_test(x, q), x, Tensor::from<double>({10, 20}, {1, 1, 1, 2}));
  check_close(dx, Tensor::from<double>({0, 10, 20, 0, 0, 0, 0, 0}, {1, 1, 2, 4}), 0, 0, "tie");
}

TEST_CASE("pool2d: avg spreads the gradient over the in-image window (exclusive) or k*k") {
  PCase q{"avg", 1, 1, 3, 3, 2, 2, 2, 2, 1, 1};
  auto x = random_tensor<double>({1, 1, 3, 3});
  auto ones = Tensor::from<double>({1, 1, 1, 1}, {1, 1, 2, 2});
  auto dx = run_pool_grad(pool_test(x, q), x, ones);
  // windows: {0}, {1,2}, {3,6}, {4,5,7,8}
  check_close(dx, Tensor::from<double>({1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.5, 0.25, 0.25}, {1, 1, 3, 3}), 1e-15, 0, "exclusive");
  q.exclusive = false;
  auto dx2 = run_pool_grad(pool_test(x, q), x, ones);
  check_close(dx2, make_tensor<double>({1, 1, 3, 3}, [](int64_t) { return 0.25; }), 1e-15, 0, "not exclusive");
}

TEST_CASE("pool2d: empty batch and non-finite values do not crash") {
  PCase q{"max", 0, 2, 4, 4, 2, 2, 2, 2, 0, 0};
  auto out = pool_test(Tensor(Shape{0, 2, 4, 4}, f32), q).run();
  CHECK(out["Out"].shape() == Shape{0, 2, 2, 2});
  q.n = 1;
  auto x = make_tensor<float>({1, 2, 4, 4}, [](int64_t i) { return i == 0 ? NAN : i == 2 ? INFINITY : float(i); });
  auto o = pool_test(x, q).run();
  CHECK(std::isnan(o["Out"].get(0)));  // max propagates NaN
  CHECK(o["Out"].get(1) == INFINITY);
  CHECK(o["Out"].get(2) == 13);
  q.type = "avg";
  auto o2 = pool_test(x, q).run();
  CHECK(std::isnan(o2["Out"].get(0)));
  CHECK(o2["Out"].get(1) == INFINITY);
  CHECK(o2["Out"].get(2) == doctest::Approx((8 + 9 + 12 + 13) / 4.0));
}

TEST_CASE("pool2d: bad shapes and attributes are oar::Errors naming the shapes") {
  auto x = random_tensor<float>({2, 3, 5, 5});
  PCase q{"max", 2, 3, 5, 5, 7, 7, 1, 1, 0, 0};
  auto msg = error_of([&] { pool_test(x, q).build(); });
  test::check_contains(msg, {"pool2d", "output size", "[2, 3, 5, 5]"});

  msg = error_of([&] { pool_test(x, {"max", 2, 3, 5, 5, 2, 2, 2, 2, 0, 0}).attr("adaptive", true).build(); });
  CHECK(msg.find("adaptive") != std::string::npos);

  msg = error_of([&] { pool_test(x, {"min", 2, 3, 5, 5, 2, 2, 2, 2, 0, 0}).build(); });
  CHECK(msg.find("pooling_type") != std::string::npos);

  msg = error_of([&] { pool_test(x, {"avg", 2, 3, 5, 5, 2, 2, 2, 2, 0, 0}).attr("data_format", "NHWC").build(); });
  CHECK(msg.find("NHWC") != std::string::npos);

  msg = error_of([&] { pool_test(random_tensor<float>({3, 5, 5}), {"avg", 2, 3, 5, 5, 2, 2, 2, 2, 0, 0}).build(); });
  CHECK(msg.find("[3, 5, 5]") != std::string::npos);
}

TEST_CASE("pool2d: 2x2 max gradient goes to the first NaN of a window, and to the first maximum elsewhere") {
  PCase q{"max", 1, 1, 2, 6, 2, 2, 2, 2, 0, 0};
  // windows (row-major inside each): {1, 5, 3, 5} -> first 5; {NaN, 2, 7, NaN} -> first NaN; {0, 0, 0, 0} -> first
  auto x = Tensor::from<double>({1, 5, NAN, 2, 0, 0, 3, 5, 7, NAN, 0, 0}, {1, 1, 2, 6});
  auto dx = run_pool_grad(pool_test(x, q), x, Tensor::from<double>({10, 20, 30}, {1, 1, 1, 3}));
  check_close(dx, Tensor::from<double>({0, 10, 20, 0, 30, 0, 0, 0, 0, 0, 0, 0}, {1, 1, 2, 6}), 0, 0, "nan and ties");
}

TEST_CASE("pool2d: 3x3 stride-2 max gradient (ResNet's stem pool) goes to each window's first maximum, ties and borders included") {
  // 1 x 1 x 5 x 7, padding 1: windows at the borders are clipped; zeros tie everywhere (relu outputs), a few
  // larger values win their windows, and the two 9s tie inside one window.
  const std::vector<double> xv = {0, 0, 0, 0, 0, 0, 0,  //
                                  0, 9, 0, 9, 0, 0, 0,  //
                                  0, 0, 0, 0, 0, 2, 0,  //
                                  0, 0, 4, 0, 0, 0, 0,  //
                                  0, 0, 0, 0, 0, 0, 1};
  const auto x = Tensor::from<double>(xv, {1, 1, 5, 7});
  const PCase q{"max", 1, 1, 5, 7, 3, 3, 2, 2, 1, 1};
  const int64_t oh = 3, ow = 4;
  std::vector<double> dout(size_t(oh * ow)), want(xv.size(), 0.0);
  for (size_t k = 0; k < dout.size(); ++k) dout[k] = double(k + 1);
  for (int64_t i = 0; i < oh; ++i)  // the reference: first maximum of each clipped window, row-major
    for (int64_t j = 0; j < ow; ++j) {
      int64_t at = -1;
      for (int64_t r = std::max<int64_t>(0, 2 * i - 1); r < std::min<int64_t>(5, 2 * i + 2); ++r)
        for (int64_t c = std::max<int64_t>(0, 2 * j - 1); c < std::min<int64_t>(7, 2 * j + 2); ++c)
          if (at < 0 || xv[size_t(r * 7 + c)] > xv[size_t(at)]) at = r * 7 + c;
      want[size_t(at)] += dout[size_t(i * ow + j)];
    }
  auto dx = run_pool_grad(pool_test(x, q), x, Tensor::from<double>(dout, {1, 1, oh, ow}));
  check_close(dx, Tensor::from<double>(want, {1, 1, 5, 7}), 0, 0, "3x3 stride 2");
  for (const char* type : {"f32"}) {  // the same in f32
    CAPTURE(type);
    auto xf = make_tensor<float>({1, 1, 5, 7}, [&](int64_t i) { return xv[size_t(i)]; });
    auto df = make_tensor<float>({1, 1, oh, ow}, [&](int64_t i) { return dout[size_t(i)]; });
    check_close(to_f64(run_pool_grad(pool_test(xf, q), xf, df)), Tensor::from<double>(want, {1, 1, 5, 7}), 0, 0, "3x3 stride 2 f32");
  }
}
