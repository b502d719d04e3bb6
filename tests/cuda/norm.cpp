// tests/cuda/norm.cpp: squared_l2_norm, clip_by_norm and sign (what clipping by norm or global norm and L1
// decay add to an update program) and layer_norm, forward and gradients, on CUDA against the CPU kernels (f32
// and f64, through the op harness on both places); and a model on cuda:0 trained with global-norm clipping, a
// per-parameter norm clip and L1 decay following the CPU's losses. Without a device the CUDA halves skip,
// saying so, and the CPU halves still run.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "cuda/compare.hpp"
#include "support/toy.hpp"

using namespace oar;
using namespace oar::test;
using namespace oar::test::cuda_check;

namespace {

double sum_of_squares(const Tensor& t) {
  double s = 0;
  for (int64_t i = 0; i < t.numel(); ++i) s += t.get(i) * t.get(i);
  return s;
}

}  // namespace

// Tolerances: tol<T>() (f32 2e-5, f64 1e-12, absolute plus relative) throughout but for the gradients of
// layer_norm (10x: g - mean(g) - xhat mean(g xhat) cancels, and the parameter gradients sum over every row).
// The sums of squares are in double on both places, so the f32 results are the CPU's to the last bit but
// for a tie in the final rounding.

TEST_CASE_TEMPLATE("cuda: squared_l2_norm and its gradient match the CPU", T, float, double) {
  // {1000, 1100}: the sum spread over the most blocks (1024 pieces); {0, 4}: empty, the sum is 0
  for (const Shape& xs : {Shape{7}, Shape{33, 17}, Shape{4, 300, 9}, Shape{1000, 1100}, Shape{0, 4}}) {
    const std::string what = xs.str();
    Tensor x = random_tensor<T>(xs, -2, 2, 31);
    OpTest f("squared_l2_norm");
    f.input("X", x);
    compare_on_cuda(f, "squared_l2_norm " + what, tol<T>(), tol<T>());
    CHECK(f.run().at("Out").get(0) == doctest::Approx(sum_of_squares(x)).epsilon(1e-6));  // the CPU half asserts the value too
    OpTest g("squared_l2_norm_grad");
    g.skip_inferred_check();
    g.input("X", x).input("Out@GRAD", random_tensor<T>({1}, -1, 1, 32));
    compare_on_cuda(g, "squared_l2_norm_grad " + what, tol<T>(), tol<T>());
  }
}

TEST_CASE_TEMPLATE("cuda: clip_by_norm with the norm below and above max_norm matches the CPU", T, float, double) {
  for (const Shape& xs : {Shape{5}, Shape{33, 17}, Shape{1000, 1100}}) {
    Tensor x = random_tensor<T>(xs, -1, 1, 41);
    const double norm = std::sqrt(sum_of_squares(x));
    for (const double max_norm : {0.5 * norm, 2 * norm}) {  // clipped to max_norm, then left as it is
      const std::string what = xs.str() + (max_norm < norm ? " clipped" : " unchanged");
      OpTest f("clip_by_norm");
      f.input("X", x).attr("max_norm", float(max_norm));
      compare_on_cuda(f, "clip_by_norm " + what, tol<T>(), tol<T>());
      const double got = std::sqrt(sum_of_squares(f.run().at("Out")));
      CHECK(got == doctest::Approx(std::min(norm, double(float(max_norm)))).epsilon(1e-5));
    }
  }
}

TEST_CASE_TEMPLATE("cuda: sign (zeros, -0, NaN, infinities) matches the CPU", T, float, double) {
  Tensor x = random_tensor<T>({9, 13}, -3, 3, 51);
  const T specials[] = {T(0), -T(0), std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(),
                        std::numeric_limits<T>::denorm_min(), -std::numeric_limits<T>::denorm_min()};
  for (size_t i = 0; i < std::size(specials); ++i) x.data<T>()[i * 11] = specials[i];
  OpTest f("sign");
  f.input("X", x);
  compare_on_cuda(f, "sign", 0, 0);
  const LoDTensor out = f.run().at("Out");
  CHECK(out.get(11) == 0.0);
  CHECK(std::signbit(out.get(11)));  // -0 stays -0
  CHECK(std::isnan(out.get(22)));
  CHECK(out.get(55) == 1.0);
  CHECK(out.get(66) == -1.0);
}

TEST_CASE("cuda: sign of int32 and int64 matches the CPU") {
  for (const bool wide : {false, true}) {
    OpTest f("sign");
    f.input("X", wide ? random_tensor<int64_t>({6, 11}, -3, 4, 52) : random_tensor<int32_t>({6, 11}, -3, 4, 53));
    compare_on_cuda(f, wide ? "sign int64" : "sign int32", 0, 0);
  }
}

TEST_CASE_TEMPLATE("cuda: layer_norm (begin_norm_axis 1 and 2, with and without Scale and Bias) and its gradient match the CPU", T, float, double) {
  struct Case {
    Shape x;
    int axis;
  };
  // k = 10, 30, 6: a warp per row; {3, 2048}, {2, 3, 40, 40}: a block per row; {1500, 8}: many rows, the
  // parameter gradients' column sums spread over many blocks
  for (const Case& k : {Case{{6, 10}, 1}, Case{{4, 5, 6}, 1}, Case{{4, 5, 6}, 2}, Case{{3, 2048}, 1}, Case{{2, 3, 40, 40}, 1}, Case{{2, 3, 40, 40}, 2},
                        Case{{1500, 8}, 1}}) {
    const int64_t cols = k.x.numel(k.axis, k.x.rank());
    Tensor x = random_tensor<T>(k.x, 2, 5, 61);  // a mean far from 0: the two-pass variance
    Tensor scale = random_tensor<T>({cols}, 0.5, 1.5, 62), bias = random_tensor<T>({cols}, -1, 1, 63);
    Tensor dy = random_tensor<T>(k.x, -1, 1, 64);
    for (const int params : {0, 1, 2, 3}) {  // bit 0: Scale, bit 1: Bias
      const bool with_scale = params & 1, with_bias = params & 2;
      const std::string what = k.x.str() + " axis " + std::to_string(k.axis) + (with_scale ? " scale" : "") + (with_bias ? " bias" : "");
      OpTest f("layer_norm");
      f.input("X", x).attr("begin_norm_axis", int32_t(k.axis)).attr("epsilon", 1e-5f);
      if (with_scale) f.input("Scale", scale);
      if (with_bias) f.input("Bias", bias);
      compare_on_cuda(f, "layer_norm " + what, tol<T>(), tol<T>());
      const auto out = f.run();
      OpTest g("layer_norm_grad");
      g.skip_inferred_check();
      g.input("X", x).input("Mean", out.at("Mean")).input("Variance", out.at("Variance")).input("Y@GRAD", dy);
      g.attr("begin_norm_axis", int32_t(k.axis)).attr("epsilon", 1e-5f);
      if (with_scale) g.input("Scale", scale);
      compare_on_cuda(g, "layer_norm_grad " + what, 10 * tol<T>(), 10 * tol<T>());
    }
  }
}

TEST_CASE("cuda: a model with layer_norm, clipped by global norm and by norm and decayed by L1, trains on cuda:0 as on the CPU") {
  const bool device = have_device();
  if (!device) MESSAGE("no CUDA device: the cuda:0 half skipped (the CPU half ran)");
  std::vector<double> per_place[2];
  const Place places[2] = {cpu(), cuda(0)};
  for (int p = 0; p < (device ? 2 : 1); ++p) {
    Tape tape;
    auto x = data("x", f32, {-1, 8});
    auto label = data("label", i64, {-1, 1});
    Var h = layer_norm(fc(x, 32)).act(relu);
    Var h2 = fc(h, 16).param(ParamAttr().with_gradient_clip(ClipByNorm(0.05))).act(relu);  // its own clip, not a global member
    auto cost = mean(cross_entropy(fc(h2, 3).act(softmax), label));
    Model model(tape.program({cost}), places[p], 17);
    Optimizer opt(model, cost, optim::sgd(0.5).with_clip(ClipByGlobalNorm(0.5)).with_regularization(L1Decay(1e-3)));
    if (p == 0) {
      const std::vector<std::string> types = op_types(opt.update_program());
      for (const std::string op : {"squared_l2_norm", "clip_by_norm", "sign", "fused_elementwise", "sgd"}) {
        CAPTURE(op);
        CHECK(std::count(types.begin(), types.end(), op) > 0);
      }
    }
    auto r = toy_classes(1024, 1).shuffle(256, 5).batch(64);
    opt.train(r, {x, label}, 2, [&](const Event& e) {
      if (e.kind == Event::Kind::end_iteration) per_place[p].push_back(e.loss);
    });
  }
  const std::vector<double>& cpu_l = per_place[0];
  REQUIRE(cpu_l.size() == 32);
  for (double l : cpu_l) CHECK(std::isfinite(l));
  CHECK(cpu_l.back() < 0.5 * cpu_l.front());  // it learns with every gradient clipped
  if (!device) return;
  REQUIRE(per_place[1].size() == cpu_l.size());
  for (size_t i = 0; i < cpu_l.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(per_place[1][i] - cpu_l[i]) <= 1e-3 * std::max(1.0, std::abs(cpu_l[i])));
  }
}
