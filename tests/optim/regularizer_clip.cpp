// tests/optim/regularizer_clip.cpp: weight decay (L2Decay / L1Decay, per parameter and global) and gradient
// clipping (by value, by norm, by global norm) as appended by optim::append_update: the fetched regularized /
// clipped gradients and the updated parameters against values computed here.
#include <algorithm>

#include "pch.hpp"
#include "support/values.hpp"

using namespace oar;
using oar::test::F;
using oar::test::values;
using oar::test::Vec;

namespace {

double sign(double v) { return v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; }
double norm2(const Vec& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return s;
}
void check_close(const Vec& got, const Vec& want, const std::string& what, double rel = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(what, "[", i, "]: got ", got[i], " want ", want[i]);
    CHECK(std::abs(got[i] - want[i]) <= rel * std::max(1.0, std::abs(want[i])));
  }
}

const Vec kA0 = {0.3, -0.2, 0.5, 0.1, -0.4, 0.25};
const Vec kB0 = {-0.6, 0.35, 0.05, -0.15, 0.7, -0.45};

/// x [-1, 3] -> fc(2, "a") + fc(2, "b") (no biases) -> square_error_cost vs y -> mean, with backward and an
/// sgd(0.1) update built from `rule`'s options.
struct Net2 {
  Topology t;
  std::vector<ParamGrad> pg;
  std::vector<ParamGrad> used;  // the gradients the update ops read
  Scope scope;
  Executor exe;
  FeedMap feeds;

  Net2(optim::Rule rule, ParamAttr a, ParamAttr b) {
    Tape tape;
    auto x = data("x", f64, {-1, 3});
    auto y = data("y", f64, {-1, 2});
    auto out = elementwise_add(fc(x, 2).param(a.with_name("a")).bias(false), fc(x, 2).param(b.with_name("b")).bias(false));
    auto loss = mean(square_error_cost(out, y));
    t = tape.program(loss);
    pg = append_backward(t.main, t.outputs[0]);
    optim::append_update(t.main, t.startup, rule, pg);
    for (auto* op : t.main.global_block().ops())
      if (op->type() == rule.type) used.push_back({op->input("Param")[0], op->input("Grad")[0]});
    exe.run(t.startup, scope);
    std::memcpy(scope.find("a")->tensor().data<double>(), kA0.data(), 6 * sizeof(double));
    std::memcpy(scope.find("b")->tensor().data<double>(), kB0.data(), 6 * sizeof(double));
    feeds["x"] = LoDTensor(Tensor::from(Vec{1.0, -2.0, 0.5, 0.3, 0.8, -1.5, -0.7, 0.2, 1.1, 2.0, -0.5, 0.4}, Shape{4, 3}));
    feeds["y"] = LoDTensor(Tensor::from(Vec{2.5, -3.0, 1.5, 2.2, -2.3, 0.9, 3.0, -1.6}, Shape{4, 2}));
  }
  std::string grad_used(const std::string& p) const {
    for (auto& u : used)
      if (u.param == p) return u.grad;
    return "";
  }
  Vec value(const std::string& n) { return values(scope.find(n)->tensor()); }
  /// For a step that fetched {a@GRAD, a's used gradient, b@GRAD, b's used gradient} as `r`: the used gradients
  /// equal `ga` and `gb`, and a and b moved from `pa` and `pb` by sgd(0.1) along them (pa and pb become the new
  /// values).
  void check_update(const std::vector<Vec>& r, const Vec& ga, const Vec& gb, Vec& pa, Vec& pb);
  /// One step; the fetched values of `names` (cloned).
  std::vector<Vec> step(const std::vector<std::string>& names) {
    auto r = exe.run(t.main, scope, feeds, names);
    std::vector<Vec> out;
    for (auto& x : r) out.push_back(values(x));
    return out;
  }
};

Vec sgd_step(const Vec& p, const Vec& g) {
  Vec out(p.size());
  for (size_t i = 0; i < p.size(); ++i) out[i] = p[i] - F(0.1) * g[i];
  return out;
}

void Net2::check_update(const std::vector<Vec>& r, const Vec& ga, const Vec& gb, Vec& pa, Vec& pb) {
  REQUIRE(r.size() == 4);
  check_close(r[1], ga, "a's gradient as the update reads it");
  check_close(r[3], gb, "b's gradient as the update reads it");
  pa = sgd_step(pa, ga);
  pb = sgd_step(pb, gb);
  check_close(value("a"), pa, "a after the step");
  check_close(value("b"), pb, "b after the step");
}

}  // namespace

TEST_CASE("regularizer: L2Decay and L1Decay on a parameter add coeff * p / coeff * sign(p) to its gradient") {
  Net2 n(optim::sgd(0.1), ParamAttr().with_regularizer(L2Decay(0.1)), ParamAttr().with_regularizer(L1Decay(0.2)));
  CHECK(n.grad_used("a") == "a@GRAD@REGULARIZED");
  CHECK(n.grad_used("b") == "b@GRAD@REGULARIZED");
  Vec pa = kA0, pb = kB0;
  for (int s = 0; s < 2; ++s) {
    auto r = n.step({"a@GRAD", "a@GRAD@REGULARIZED", "b@GRAD", "b@GRAD@REGULARIZED"});
    Vec ra(6), rb(6);
    for (size_t i = 0; i < 6; ++i) {
      ra[i] = r[0][i] + F(0.1) * pa[i];
      rb[i] = r[2][i] + F(0.2) * sign(pb[i]);
    }
    n.check_update(r, ra, rb, pa, pb);  // a: L2, b: L1
  }
  // The ops: sign only for L1; scale by coeff; sum with the gradient.
  int signs = 0;
  for (auto* op : n.t.main.global_block().ops()) {
    if (op->type() == "sign") {
      ++signs;
      CHECK(op->input("X")[0] == "b");
    }
    if (op->type() == "scale" && op->output("Out")[0] == "a@DECAY") CHECK(op->attr<float>("scale") == 0.1f);
  }
  CHECK(signs == 1);
}

TEST_CASE("regularizer: the rule's global regularizer applies to parameters without their own") {
  Net2 n(optim::sgd(0.1).with_regularization(L2Decay(0.05)), ParamAttr().with_regularizer(L1Decay(0.2)), ParamAttr());
  auto r = n.step({"a@GRAD", "a@GRAD@REGULARIZED", "b@GRAD", "b@GRAD@REGULARIZED"});
  Vec ra(6), rb(6);
  for (size_t i = 0; i < 6; ++i) {
    ra[i] = r[0][i] + F(0.2) * sign(kA0[i]);  // its own L1 wins over the global L2
    rb[i] = r[2][i] + F(0.05) * kB0[i];
  }
  Vec pa = kA0, pb = kB0;
  n.check_update(r, ra, rb, pa, pb);  // a: its own L1, b: the global L2
}

TEST_CASE("regularizer: no regularizer (or coeff 0) leaves the gradient alone") {
  Net2 n(optim::sgd(0.1).with_regularization(L2Decay(0)), ParamAttr(), ParamAttr());
  CHECK(n.grad_used("a") == "a@GRAD");
  CHECK(n.grad_used("b") == "b@GRAD");
  CHECK_FALSE(n.t.main.global_block().has_var("a@GRAD@REGULARIZED"));
  auto r = n.step({"a@GRAD"});
  check_close(n.value("a"), sgd_step(kA0, r[0]), "a");
}

TEST_CASE("clip: ClipByValue clamps each gradient element to [min, max]") {
  // A bound between the magnitudes of a's gradient elements, so that some are clipped and some are not.
  Vec mags;
  {
    Net2 plain(optim::sgd(0.1), ParamAttr(), ParamAttr());
    auto r = plain.step({"a@GRAD"});
    for (double g : r[0]) mags.push_back(std::abs(g));
  }
  std::sort(mags.begin(), mags.end());
  REQUIRE(mags[2] < mags[3]);
  const double bound = F((mags[2] + mags[3]) / 2);
  Net2 n(optim::sgd(0.1).with_clip(ClipByValue(bound)), ParamAttr(), ParamAttr().with_gradient_clip(ClipByValue(0.3, -0.1)));
  CHECK(n.grad_used("a") == "a@GRAD@CLIP");
  Vec pa = kA0, pb = kB0;
  for (int s = 0; s < 2; ++s) {
    auto r = n.step({"a@GRAD", "a@GRAD@CLIP", "b@GRAD", "b@GRAD@CLIP"});
    Vec ca(6), cb(6);
    int clipped = 0, kept = 0;
    for (size_t i = 0; i < 6; ++i) {
      ca[i] = std::clamp(r[0][i], -bound, bound);
      cb[i] = std::clamp(r[2][i], F(-0.1), F(0.3));  // b's own clip wins
      (std::abs(r[0][i]) > bound ? clipped : kept)++;
    }
    if (s == 0) {
      CHECK(clipped > 0);
      CHECK(kept > 0);
    }
    n.check_update(r, ca, cb, pa, pb);
  }
}

TEST_CASE("clip: ClipByNorm scales a gradient whose L2 norm exceeds clip_norm down to it, per parameter") {
  Net2 n(optim::sgd(0.1).with_clip(ClipByNorm(0.5)), ParamAttr(), ParamAttr().with_gradient_clip(ClipByNorm(1e3)));
  auto r = n.step({"a@GRAD", "a@GRAD@CLIP", "b@GRAD", "b@GRAD@CLIP"});
  double na = std::sqrt(norm2(r[0]));
  REQUIRE(na > 0.5);
  Vec ca(6);
  for (size_t i = 0; i < 6; ++i) ca[i] = r[0][i] * F(0.5) / std::max(na, F(0.5));
  check_close(r[1], ca, "a clipped to norm 0.5", 1e-9);
  CHECK(std::sqrt(norm2(r[1])) == doctest::Approx(0.5).epsilon(1e-6));
  check_close(r[3], r[2], "b below its clip norm: unchanged", 1e-9);
  check_close(n.value("a"), sgd_step(kA0, ca), "a", 1e-9);
  check_close(n.value("b"), sgd_step(kB0, r[2]), "b", 1e-9);
}

TEST_CASE("clip: ClipByGlobalNorm scales every member gradient by c / max(c, global norm)") {
  SUBCASE("clipping") {
    Net2 n(optim::sgd(0.1).with_clip(ClipByGlobalNorm(0.8)), ParamAttr(), ParamAttr());
    CHECK(n.grad_used("a") == "a@GRAD@CLIP");
    CHECK(n.grad_used("b") == "b@GRAD@CLIP");
    auto r = n.step({"a@GRAD", "a@GRAD@CLIP", "b@GRAD", "b@GRAD@CLIP"});
    double global = std::sqrt(norm2(r[0]) + norm2(r[2]));
    REQUIRE(global > 0.8);
    double scale = 0.8 / std::max(0.8, global);
    Vec ca(6), cb(6);
    for (size_t i = 0; i < 6; ++i) {
      ca[i] = r[0][i] * scale;
      cb[i] = r[2][i] * scale;
    }
    CHECK(std::sqrt(norm2(r[1]) + norm2(r[3])) == doctest::Approx(0.8).epsilon(1e-12));
    Vec pa = kA0, pb = kB0;
    n.check_update(r, ca, cb, pa, pb);
  }
  SUBCASE("below the norm nothing changes; a parameter with its own clip is not a member") {
    Net2 n(optim::sgd(0.1).with_clip(ClipByGlobalNorm(1e3)), ParamAttr().with_gradient_clip(ClipByValue(0.2)), ParamAttr());
    auto r = n.step({"a@GRAD", "a@GRAD@CLIP", "b@GRAD", "b@GRAD@CLIP"});
    check_close(r[3], r[2], "b unchanged");
    Vec ca(6);
    for (size_t i = 0; i < 6; ++i) ca[i] = std::clamp(r[0][i], F(-0.2), F(0.2));
    check_close(r[1], ca, "a by value");
    int sq = 0;
    for (auto* op : n.t.main.global_block().ops()) sq += op->type() == "squared_l2_norm";
    CHECK(sq == 1);
  }
}

TEST_CASE("clip then regularize (Fluid's minimize order): the decay is added to the clipped gradient") {
  Net2 n(optim::sgd(0.1).with_clip(ClipByValue(0.2)).with_regularization(L2Decay(0.5)), ParamAttr(), ParamAttr());
  CHECK(n.grad_used("a") == "a@GRAD@CLIP@REGULARIZED");
  auto r = n.step({"a@GRAD", "a@GRAD@CLIP@REGULARIZED"});
  Vec want(6);
  for (size_t i = 0; i < 6; ++i) want[i] = std::clamp(r[0][i], F(-0.2), F(0.2)) + F(0.5) * kA0[i];
  check_close(r[1], want, "clip(g) + coeff p");
  check_close(n.value("a"), sgd_step(kA0, want), "a");
}
