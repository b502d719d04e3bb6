// tests/cuda/sequence.cpp: the CUDA kernels of kernels/cuda/sequence.cu and sequence_conv.cu against the CPU
// kernels of the same ops: sequence_pool (every pooltype, MaxIndex, a 2-level LoD), sequence_softmax,
// sequence_expand (X with and without LoD, every ref_level, an integer dtype) and sequence_conv (context starts
// before, at and after the row) and their gradients, f32 and f64, over ragged LoDs with an empty and a length-1
// sequence and one longer than a warp. Copies and maxima must be equal; sums and softmax within tol<T>(). The
// outputs' LoD must be the CPU's.
#include <doctest/doctest.h>

#include "cuda/compare.hpp"

using namespace oar;
using namespace oar::test;
using namespace oar::test::cuda_check;

namespace {

const char* const kPoolTypes[] = {"AVERAGE", "SUM", "SQRT", "MAX", "LAST", "FIRST"};

// 6 sequences: 3 rows, empty, 1 row, 70 rows (longer than a warp), empty, 2 rows.
const LoD kLoD{{0, 3, 3, 4, 74, 74, 76}};
constexpr int64_t kRows = 76;

/// compare_on_cuda, and on a device also each output's LoD against the CPU's.
void compare_with_lod(const OpTest& t, const std::string& what, double atol, double rtol) {
  compare_on_cuda(t, what, atol, rtol);
  if (!have_device()) return;
  const auto cpu_out = t.run(cpu());
  const auto gpu_out = t.run(cuda(0));
  for (auto& [key, want] : cpu_out) CHECK_MESSAGE(gpu_out.at(key).lod() == want.lod(), what << ": " << key << " LoD");
}

}  // namespace

TEST_CASE_TEMPLATE("cuda: sequence_pool and its gradient match the CPU for every pooltype", T, float, double) {
  const Tensor x = random_tensor<T>({kRows, 2, 3}, -2, 2, 31);
  const LoD two{{0, 2, 3}, {0, 2, 2, 5}};  // a 2-level LoD over 5 rows: Out keeps the upper level
  const Tensor x2 = random_tensor<T>({5, 4}, -2, 2, 32);
  for (const char* type : kPoolTypes) {
    const std::string pt = type;
    const bool exact = pt == "MAX" || pt == "LAST" || pt == "FIRST";
    const double t = exact ? 0 : tol<T>();
    OpTest f("sequence_pool");
    f.input("X", LoDTensor(x, kLoD)).attr("pooltype", pt).unknown_batch();
    compare_with_lod(f, "sequence_pool " + pt, t, t);
    OpTest f2("sequence_pool");
    f2.input("X", LoDTensor(x2, two)).attr("pooltype", pt).unknown_batch();
    compare_with_lod(f2, "sequence_pool 2-level " + pt, t, t);

    const auto fwd = f.run();
    OpTest g("sequence_pool_grad");
    g.skip_inferred_check();
    g.input("X", LoDTensor(x, kLoD)).input("MaxIndex", fwd.at("MaxIndex")).input("Out@GRAD", random_tensor<T>({6, 2, 3}, -1, 1, 33)).attr("pooltype", pt);
    compare_with_lod(g, "sequence_pool_grad " + pt, t, t);
  }
}

TEST_CASE_TEMPLATE("cuda: sequence_softmax and its gradient match the CPU", T, float, double) {
  for (const Shape& s : {Shape{kRows, 1}, Shape{kRows}}) {
    const Tensor x = random_tensor<T>(s, -4, 4, 41);
    OpTest f("sequence_softmax");
    f.input("X", LoDTensor(x, kLoD)).unknown_batch();
    compare_with_lod(f, "sequence_softmax " + s.str(), tol<T>(), tol<T>());
    const LoDTensor y = f.run().at("Out");
    OpTest g("sequence_softmax_grad");
    g.skip_inferred_check();
    g.input("Out", LoDTensor(y, kLoD)).input("Out@GRAD", random_tensor<T>(s, -1, 1, 42));
    compare_with_lod(g, "sequence_softmax_grad " + s.str(), tol<T>(), tol<T>());
  }
}

TEST_CASE_TEMPLATE("cuda: sequence_expand and its gradient match the CPU, X with and without LoD", T, float, double) {
  // y: 4 top sequences of 3, 0, 1, 2 sub-sequences; 6 sub-sequences over 9 rows (one empty, one of 1 row).
  const LoD ylod{{0, 3, 3, 4, 6}, {0, 1, 1, 4, 5, 7, 9}};
  const LoDTensor y(random_tensor<T>({9, 1}), ylod);
  struct Case {
    Tensor x;
    LoD xlod;
    int32_t ref;
    const char* what;
  };
  // X with LoD: 4 sequences (one empty, one of length 1) by y's level 0; X without: rows by level 0 and by the last.
  for (const Case& k : {Case{random_tensor<T>({7, 2, 3}, -5, 5, 51), {{0, 2, 2, 3, 7}}, 0, "sequences, ref_level 0"},
                        Case{random_tensor<T>({4, 3}, -5, 5, 52), {}, 0, "rows, ref_level 0"},
                        Case{random_tensor<T>({6, 4}, -5, 5, 53), {}, -1, "rows, ref_level -1"}}) {
    OpTest f("sequence_expand");
    f.input("X", LoDTensor(k.x, k.xlod)).input("Y", y).attr("ref_level", k.ref).unknown_batch();
    compare_with_lod(f, std::string("sequence_expand ") + k.what, 0, 0);
    const LoDTensor out = f.run().at("Out");
    OpTest g("sequence_expand_grad");
    g.skip_inferred_check();
    g.input("X", LoDTensor(k.x, k.xlod)).input("Y", y).input("Out@GRAD", random_tensor<T>(out.shape(), -1, 1, 54)).attr("ref_level", k.ref);
    compare_with_lod(g, std::string("sequence_expand_grad ") + k.what, tol<T>(), tol<T>());
  }
}

TEST_CASE("cuda: sequence_expand copies an integer X as the CPU does") {
  const LoDTensor y(random_tensor<float>({5, 1}), {{0, 2, 2, 5}});
  OpTest f("sequence_expand");
  f.input("X", LoDTensor(random_tensor<int64_t>({3, 2}, -9, 9, 61))).input("Y", y).unknown_batch();
  compare_with_lod(f, "sequence_expand int64", 0, 0);
}

TEST_CASE_TEMPLATE("cuda: sequence_conv and its gradients match the CPU", T, float, double) {
  // Products on cuBLAS: f32 sums in another order than the CPU's gemm, hence 1e-4 (the values are O(10)).
  const double t = std::is_same_v<T, double> ? 1e-12 : 1e-4;
  const int64_t d = 3, m = 5;
  for (auto [start, len] : {std::pair{-1, 3}, {0, 1}, {-2, 4}, {2, 2}}) {
    const Tensor x = random_tensor<T>({kRows, d}, -1, 1, 71);
    const Tensor w = random_tensor<T>({len * d, m}, -1, 1, 72);
    const std::string what = "start " + std::to_string(start) + " length " + std::to_string(len);
    OpTest f("sequence_conv");
    f.input("X", LoDTensor(x, kLoD)).input("Filter", w).attr("contextLength", len).attr("contextStart", start).unknown_batch();
    compare_with_lod(f, "sequence_conv " + what, t, t);
    OpTest g("sequence_conv_grad");
    g.skip_inferred_check();
    g.input("X", LoDTensor(x, kLoD)).input("Filter", w).input("Out@GRAD", random_tensor<T>({kRows, m}, -1, 1, 73));
    g.attr("contextLength", len).attr("contextStart", start);
    compare_with_lod(g, "sequence_conv_grad " + what, t, t);
  }
}

TEST_CASE("cuda: sequence_conv of rows with no features (D = 0) is zeros, as on the CPU") {
  // The product has k = 0, whose leading dimension is 0: cuBLAS must still be given 1.
  OpTest f("sequence_conv");
  f.input("X", LoDTensor(Tensor(Shape{kRows, 0}, f32), kLoD)).input("Filter", Tensor(Shape{0, 4}, f32)).attr("contextLength", 3).attr("contextStart", -1);
  const auto out = f.run(cpu()).at("Out");
  REQUIRE(out.shape() == Shape{kRows, 4});
  for (int64_t i = 0; i < out.numel(); ++i) CHECK(out.get(i) == 0);
  compare_with_lod(f, "sequence_conv D = 0", 0, 0);
}

namespace {

LoDTensor bool_mask(const std::vector<int>& m) {
  Tensor t(Shape{int64_t(m.size()), 1}, boolean);
  for (size_t i = 0; i < m.size(); ++i) t.data<bool>()[i] = m[i] != 0;
  return LoDTensor(t);
}

}  // namespace

TEST_CASE_TEMPLATE("cuda: split_lod_tensor and merge_lod_tensor (+ grad) move the CPU's rows", T, float, double, int64_t) {
  // Items: the 6 sequences of kLoD (empty, 1-row and 70-row ones among them), or the rows of a matrix.
  const Tensor x = random_tensor<T>({kRows, 3}, -5, 5, 81);
  const Tensor rows = random_tensor<T>({7, 2}, -5, 5, 82);
  struct Case {
    LoDTensor x;
    LoDTensor mask;
    const char* what;
  };
  for (const Case& k : {Case{LoDTensor(x, kLoD), bool_mask({1, 0, 0, 1, 1, 0}), "sequences"}, Case{LoDTensor(x, kLoD), bool_mask({1, 1, 1, 1, 1, 1}), "all true"},
                        Case{LoDTensor(rows), bool_mask({0, 1, 1, 0, 1, 0, 0}), "rows"}}) {
    OpTest s("split_lod_tensor");
    s.input("X", k.x).input("Mask", k.mask).unknown_batch();
    compare_with_lod(s, std::string("split_lod_tensor ") + k.what, 0, 0);
    auto parts = s.run();
    OpTest m("merge_lod_tensor");
    m.input("InTrue", parts.at("OutTrue")).input("InFalse", parts.at("OutFalse")).input("X", k.x).input("Mask", k.mask).unknown_batch();
    compare_with_lod(m, std::string("merge_lod_tensor ") + k.what, 0, 0);
    if constexpr (!std::is_integral_v<T>) {
      OpTest g("merge_lod_tensor_grad");
      g.skip_inferred_check();
      g.input("InTrue", parts.at("OutTrue")).input("InFalse", parts.at("OutFalse")).input("X", k.x).input("Mask", k.mask);
      g.input("Out@GRAD", random_tensor<T>(k.x.shape(), -1, 1, 83));
      compare_with_lod(g, std::string("merge_lod_tensor_grad ") + k.what, 0, 0);
    }
  }
}
