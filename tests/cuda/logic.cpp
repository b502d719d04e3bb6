// tests/cuda/logic.cpp: the CUDA kernels of kernels/cuda/logic.cu against the CPU kernels of the same ops: the
// comparisons (ties, NaN, -0, Y broadcast from an axis; i32, i64, f32, f64), the two-input logical ops,
// one_hot (every output dtype, i32 and i64 labels, its out-of-range error) and sigmoid_cross_entropy_with_logits
// with its gradient (with and without ignored labels). Bool and integer results must be equal; the loss within
// tol<T>().
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "cuda/compare.hpp"

using namespace oar;
using namespace oar::test;
using namespace oar::test::cuda_check;

namespace {

/// Random integers in [lo, hi) as T: equal elements (ties) are common in every dtype.
template <class T>
Tensor small_values(const Shape& s, int64_t lo, int64_t hi, uint64_t seed) {
  const Tensor r = random_tensor<int64_t>(s, double(lo), double(hi), seed);
  return make_tensor<T>(s, [&](int64_t i) { return r.data<int64_t>()[i]; });
}

Tensor random_bools(const Shape& s, uint64_t seed) {
  const Tensor r = random_tensor<int32_t>(s, 0, 2, seed);
  Tensor b(s, DType::boolean);
  for (int64_t i = 0; i < b.numel(); ++i) b.data<bool>()[i] = r.data<int32_t>()[i] != 0;
  return b;
}

}  // namespace

TEST_CASE_TEMPLATE("cuda: compare ops (ties, NaN, -0, Y broadcast from axis) match the CPU", T, int32_t, int64_t, float, double) {
  struct Case { Shape x, y; int axis; };
  const Case cases[] = {{{6, 5}, {6, 5}, -1},   {{64, 10}, {10}, -1},    {{4, 3, 5}, {3}, 1},  {{2, 3, 4, 5}, {3, 4}, 1},
                        {{5, 4}, {5}, 0},       {{7, 3}, {1}, -1},       {{2, 3, 4}, {3, 1}, 1}, {{1000}, {1000}, -1}};
  uint64_t seed = 1;
  for (const Case& k : cases) {
    Tensor x = small_values<T>(k.x, -3, 3, seed++), y = small_values<T>(k.y, -3, 3, seed++);
    if constexpr (std::is_floating_point_v<T>) {  // NaN on either side, and -0 against 0
      const T nan = std::numeric_limits<T>::quiet_NaN();
      x.data<T>()[1] = nan;
      x.data<T>()[2] = T(-0.0);
      y.data<T>()[0] = nan;
      if (y.numel() > 2) y.data<T>()[2] = T(0);
    }
    for (const char* op : {"less_than", "less_equal", "greater_than", "greater_equal", "equal", "not_equal"}) {
      OpTest t(op);
      t.input("X", x).input("Y", y).attr("axis", int32_t(k.axis));
      compare_on_cuda(t, std::string(op) + " " + k.x.str() + " " + k.y.str() + " axis " + std::to_string(k.axis), 0, 0);
    }
  }
}

TEST_CASE("cuda: compare ops: mismatched dtypes are the CPU's oar::Error on the device too") {
  OpTest t("less_than");
  t.input("X", Tensor::from<float>({1, 2})).input("Y", Tensor::from<double>({1, 2}));
  CHECK(error_of([&] { t.run(cpu()); }).find("less_than: X is f32 but Y is f64") != std::string::npos);
  if (have_device()) CHECK(error_of([&] { t.run(cuda(0)); }).find("less_than: X is f32 but Y is f64") != std::string::npos);
}

TEST_CASE("cuda: logical_and, logical_or and logical_xor match the CPU") {
  for (const Shape& s : {Shape{4}, Shape{37, 11}, Shape{3, 1000}, Shape{0, 5}}) {
    const Tensor x = random_bools(s, 11), y = random_bools(s, 12);
    for (const char* op : {"logical_and", "logical_or", "logical_xor"}) {
      OpTest t(op);
      t.input("X", x).input("Y", y);
      compare_on_cuda(t, std::string(op) + " " + s.str(), 0, 0);
    }
  }
}

TEST_CASE("cuda: one_hot (f32, f64, i32, i64 rows from i32 and i64 labels) matches the CPU") {
  for (int64_t n : {1, 37, 1000, 0})
    for (int32_t depth : {1, 10, 300})
      for (DType t : {f32, f64, i32, i64}) {
        const Tensor l64 = random_tensor<int64_t>({n, 1}, 0, depth, uint64_t(n + depth));
        const Tensor l32 = random_tensor<int32_t>({n, 1}, 0, depth, uint64_t(n + depth + 1));
        for (const Tensor* lab : {&l64, &l32}) {
          OpTest o("one_hot");
          o.input("X", *lab).attr("depth", depth).attr("dtype", int32_t(t));
          compare_on_cuda(o, "one_hot n " + std::to_string(n) + " depth " + std::to_string(depth) + " to " + std::string(name(t)) + " from " +
                                 std::string(name(lab->dtype())), 0, 0);
        }
      }
  OpTest r3("one_hot");  // a label tensor of rank 3: [2, 3, 1] -> [2, 3, depth]
  r3.input("X", random_tensor<int64_t>({2, 3, 1}, 0, 4, 5)).attr("depth", int32_t(4));
  compare_on_cuda(r3, "one_hot rank 3", 0, 0);
}

TEST_CASE("cuda: one_hot: a label outside [0, depth) is the CPU's oar::Error, naming it, on the device too") {
  for (const Tensor& lab : {Tensor::from<int64_t>({1, 5, 2}, Shape{3, 1}), Tensor::from<int32_t>({1, 5, 2}, Shape{3, 1})}) {
    OpTest o("one_hot");
    o.input("X", lab).attr("depth", int32_t(4));
    const std::string want = "one_hot: X[1] = 5 is out of range [0, 4) (depth = 4)";
    CHECK(error_of([&] { o.run(cpu()); }).find(want) != std::string::npos);
    if (have_device()) CHECK(error_of([&] { o.run(cuda(0)); }).find(want) != std::string::npos);
  }
  OpTest neg("one_hot");
  neg.input("X", Tensor::from<int64_t>({0, -2}, Shape{2, 1})).attr("depth", int32_t(4));
  if (have_device()) CHECK(error_of([&] { neg.run(cuda(0)); }).find("X[1] = -2 is out of range") != std::string::npos);
}

TEST_CASE_TEMPLATE("cuda: sigmoid_cross_entropy_with_logits and its gradient (with and without ignored labels) match the CPU", T, float, double) {
  const T nan = std::numeric_limits<T>::quiet_NaN(), inf = std::numeric_limits<T>::infinity();
  for (const Shape& s : {Shape{37, 5}, Shape{5000}, Shape{0, 3}}) {
    const uint64_t seed = uint64_t(s.numel());
    Tensor x = random_tensor<T>(s, -30, 30, seed), label = random_tensor<T>(s, 0, 1, seed + 1);
    const Tensor dout = random_tensor<T>(s, -1, 1, seed + 2);
    if (s.numel() > 8) {  // extreme logits, a hard label, a NaN logit
      x.data<T>()[0] = T(100), x.data<T>()[1] = T(-100), x.data<T>()[2] = nan, x.data<T>()[3] = inf, x.data<T>()[4] = -inf, x.data<T>()[5] = T(0);
      label.data<T>()[0] = T(1), label.data<T>()[1] = T(0);
    }
    Tensor ignored = label.clone();  // the default ignore_index -100 at a few labels, one of them at the NaN logit
    for (int64_t i = 2; i < ignored.numel(); i += 7) ignored.data<T>()[i] = T(-100);
    Tensor ones = label.clone();  // ignore_index = 1: every hard label 1 is ignored
    for (int64_t i = 0; i < ones.numel(); i += 3) ones.data<T>()[i] = T(1);
    struct Run { const Tensor* label; int32_t ignore; const char* what; };
    for (const Run& r : {Run{&label, -100, "no label ignored"}, Run{&ignored, -100, "labels -100 ignored"}, Run{&ones, 1, "ignore_index 1"}}) {
      const std::string what = std::string(r.what) + " " + s.str();
      OpTest f("sigmoid_cross_entropy_with_logits");
      f.input("X", x).input("Label", *r.label).attr("ignore_index", r.ignore);
      compare_on_cuda(f, "sigmoid_cross_entropy_with_logits " + what, tol<T>(), tol<T>());
      OpTest g("sigmoid_cross_entropy_with_logits_grad");
      g.skip_inferred_check();
      g.input("X", x).input("Label", *r.label).input("Out@GRAD", dout).attr("ignore_index", r.ignore);
      compare_on_cuda(g, "sigmoid_cross_entropy_with_logits_grad " + what, tol<T>(), tol<T>());
    }
  }
}
