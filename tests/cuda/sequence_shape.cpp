// tests/cuda/sequence_shape.cpp: the CUDA kernels of kernels/cuda/sequence_shape.hpp, and the CPU kernels that
// serve CUDA too (`any_place`: sequence_reshape, lod_reset), against the CPU: sequence_concat, sequence_pad
// (PadValue one value or a step), sequence_unpad, sequence_slice, sequence_reshape and their gradients,
// sequence_mask and lod_reset (target_lod, Y's LoD, Y's values) with its gradient; f32, f64 and an integer
// dtype, over ragged LoDs with an empty and a length-1 sequence and one longer than a warp. Every op copies, so
// the results must be equal, and so must the outputs' LoD and the errors of bad Offset, Length and lengths.
#include <doctest/doctest.h>

#include "cuda/compare.hpp"

using namespace oar;
using namespace oar::test;
using namespace oar::test::cuda_check;

namespace {

// 6 sequences: 3 rows, empty, 1 row, 70 rows (longer than a warp), empty, 2 rows.
const LoD kLoD{{0, 3, 3, 4, 74, 74, 76}};
constexpr int64_t kRows = 76;

/// compare_on_cuda with tolerance 0, and on a device also each output's LoD against the CPU's.
void compare_exact(const OpTest& t, const std::string& what) {
  compare_on_cuda(t, what, 0, 0);
  if (!have_device()) return;
  const auto cpu_out = t.run(cpu());
  const auto gpu_out = t.run(cuda(0));
  for (auto& [key, want] : cpu_out) CHECK_MESSAGE(gpu_out.at(key).lod() == want.lod(), what << ": " << key << " LoD");
}

/// The CPU's error for `t` contains `want`, and on a device the CUDA kernel's is the same text.
void same_error(const OpTest& t, const std::string& want) {
  CAPTURE(want);
  const std::string on_cpu = error_of([&] { t.run(cpu()); });
  CHECK(on_cpu.find(want) != std::string::npos);
  if (have_device()) CHECK(error_of([&] { t.run(cuda(0)); }) == on_cpu);
}

Tensor i64s(std::vector<int64_t> v, Shape s) { return Tensor::from<int64_t>(v, s); }

}  // namespace

TEST_CASE_TEMPLATE("cuda: sequence_concat and its gradient match the CPU", T, float, double, int64_t) {
  // Three inputs of 6 sequences each: kLoD's, one with a 38-row sequence, one whose rows sit in two sequences.
  const LoD la = kLoD, lb{{0, 1, 1, 1, 2, 40, 41}}, lc{{0, 0, 2, 2, 3, 3, 3}};
  const std::vector<LoDTensor> xs{LoDTensor(random_tensor<T>({kRows, 2, 3}, -9, 9, 11), la), LoDTensor(random_tensor<T>({41, 2, 3}, -9, 9, 12), lb),
                                  LoDTensor(random_tensor<T>({3, 2, 3}, -9, 9, 13), lc)};
  OpTest f("sequence_concat");
  f.inputs("X", xs).unknown_batch();
  compare_exact(f, "sequence_concat");
  const LoDTensor out = f.run().at("Out");
  OpTest g("sequence_concat_grad");
  g.skip_inferred_check();
  g.inputs("X", xs).input("Out@GRAD", random_tensor<T>(out.shape(), -9, 9, 14)).outputs("X@GRAD", 3);
  compare_exact(g, "sequence_concat_grad");
}

TEST_CASE_TEMPLATE("cuda: sequence_pad and its gradient match the CPU, PadValue one value or a step", T, float, double, int64_t) {
  const Tensor x = random_tensor<T>({kRows, 2, 3}, -9, 9, 21);
  const LoD two{{0, 2, 3, 6}, kLoD[0]};  // 2 levels: the top-level sequences hold 3, 1 and 72 rows
  for (const LoD& lod : {kLoD, two})
    for (bool scalar : {true, false})
      for (int padded : {-1, 80}) {
        const std::string what = "sequence_pad " + std::to_string(lod.size()) + " levels, " + (scalar ? "one value" : "a step") + ", padded_length " +
                                 std::to_string(padded);
        const Tensor pad = scalar ? Tensor::from<T>({T(-7)}, Shape{1}) : random_tensor<T>({2, 3}, 20, 30, 22);
        OpTest f("sequence_pad");
        f.input("X", LoDTensor(x, lod)).input("PadValue", pad).attr("padded_length", padded).unknown_batch();
        compare_exact(f, what);
        const LoDTensor out = f.run().at("Out");
        OpTest g("sequence_pad_grad");
        g.skip_inferred_check();
        g.input("X", LoDTensor(x, lod)).input("Out@GRAD", random_tensor<T>(out.shape(), -9, 9, 23)).attr("padded_length", padded);
        compare_exact(g, what + " grad");
      }
}

TEST_CASE_TEMPLATE("cuda: sequence_unpad and its gradient match the CPU", T, float, double, int32_t) {
  const int64_t S = 5, L = 40;
  const Tensor x = random_tensor<T>({S, L, 3}, -9, 9, 31);
  const Tensor len = i64s({3, 0, 1, 40, 2}, Shape{S});
  OpTest f("sequence_unpad");
  f.input("X", x).input("Length", len).unknown_batch();
  compare_exact(f, "sequence_unpad");
  const LoDTensor out = f.run().at("Out");
  OpTest g("sequence_unpad_grad");
  g.skip_inferred_check();
  g.input("X", x).input("Length", len).input("Out@GRAD", random_tensor<T>(out.shape(), -9, 9, 32));
  compare_exact(g, "sequence_unpad_grad");
}

TEST_CASE_TEMPLATE("cuda: sequence_slice and its gradient match the CPU, one and two LoD levels", T, float, double, int64_t) {
  const Tensor x = random_tensor<T>({kRows, 2, 3}, -9, 9, 41);
  const Tensor off = i64s({1, 0, 0, 5, 0, 0}, Shape{6, 1}), len = i64s({2, 0, 1, 40, 0, 2}, Shape{6, 1});
  const LoD two{{0, 2, 6}, kLoD[0]};
  for (const LoD& lod : {kLoD, two}) {
    const std::string what = "sequence_slice " + std::to_string(lod.size()) + " levels";
    OpTest f("sequence_slice");
    f.input("X", LoDTensor(x, lod)).input("Offset", off).input("Length", len).unknown_batch();
    compare_exact(f, what);
    OpTest g("sequence_slice_grad");
    g.skip_inferred_check();
    g.input("X", LoDTensor(x, lod)).input("Offset", off).input("Length", len).input("Out@GRAD", random_tensor<T>({45, 2, 3}, -9, 9, 42));
    compare_exact(g, what + " grad");
  }
}

TEST_CASE_TEMPLATE("cuda: sequence_reshape and its gradient match the CPU", T, float, double) {
  const Tensor x = random_tensor<T>({kRows, 6}, -9, 9, 51);
  for (int32_t nd : {2, 3, 6}) {
    const std::string what = "sequence_reshape new_dim " + std::to_string(nd);
    OpTest f("sequence_reshape");
    f.input("X", LoDTensor(x, kLoD)).attr("new_dim", nd).unknown_batch();
    compare_exact(f, what);
    OpTest g("sequence_reshape_grad");
    g.skip_inferred_check();
    g.input("X", LoDTensor(x, kLoD)).input("Out@GRAD", random_tensor<T>({kRows * 6 / nd, nd}, -9, 9, 52)).attr("new_dim", nd);
    compare_exact(g, what + " grad");
  }
}

TEST_CASE("cuda: sequence_mask matches the CPU for i32 and i64 lengths, maxlen given or not, every out_dtype") {
  const LoDTensor l64(i64s({3, 0, 1, 40, 2, 7}, Shape{6}), {{0, 2, 6}});  // the LoD passes to Y
  const LoDTensor l32(Tensor::from<int32_t>({5, 0, 1, 33}, Shape{4, 1}));
  for (const LoDTensor& len : {l64, l32})
    for (int32_t maxlen : {-1, 0, 5})
      for (DType t : {DType::boolean, DType::u8, DType::i8, DType::i16, DType::i32, DType::i64, DType::f32, DType::f64}) {
        OpTest f("sequence_mask");
        f.input("X", len).attr("maxlen", maxlen).attr("out_dtype", int32_t(t));
        compare_exact(f, "sequence_mask " + std::string(name(len.dtype())) + " maxlen " + std::to_string(maxlen) + " " + std::string(name(t)));
      }
}

TEST_CASE_TEMPLATE("cuda: lod_reset and its gradient match the CPU, the LoD from target_lod, Y's LoD or Y's values", T, float, double, int64_t) {
  const Tensor x = random_tensor<T>({kRows, 3}, -9, 9, 61);
  const LoDTensor x_lod(x, {{0, 40, 76}});
  OpTest target("lod_reset");
  target.input("X", x_lod).attr("target_lod", std::vector<int32_t>{0, 3, 3, 4, 74, 74, 76});
  compare_exact(target, "lod_reset target_lod");
  OpTest by_lod("lod_reset");
  by_lod.input("X", LoDTensor(x)).input("Y", LoDTensor(random_tensor<float>({kRows, 1}), {{0, 2, 6}, kLoD[0]}));
  compare_exact(by_lod, "lod_reset Y's LoD");
  OpTest by_i32("lod_reset");
  by_i32.input("X", x_lod).input("Y", LoDTensor(Tensor::from<int32_t>({0, 1, 1, 76}, Shape{4})));
  compare_exact(by_i32, "lod_reset Y's values (i32 [K])");
  OpTest by_i64("lod_reset");
  by_i64.input("X", x_lod).input("Y", LoDTensor(i64s({0, 33, 70, 76}, Shape{4, 1})));
  compare_exact(by_i64, "lod_reset Y's values (i64 [K, 1])");

  OpTest g("lod_reset_grad");
  g.skip_inferred_check();
  g.input("X", LoDTensor(x, kLoD)).input("Out@GRAD", random_tensor<T>({kRows, 3}, -9, 9, 62));
  compare_exact(g, "lod_reset_grad");
}

TEST_CASE("cuda: bad Offset, Length, lengths and offsets give the CPU's errors") {
  const LoDTensor x(random_tensor<float>({kRows, 2}), kLoD);
  OpTest slice("sequence_slice");
  slice.input("X", x).input("Offset", i64s({1, 0, 0, 69, 0, 0}, Shape{6, 1})).input("Length", i64s({2, 0, 1, 2, 0, 2}, Shape{6, 1}));
  same_error(slice, "sequence_slice: sequence 3 has 70 rows; Offset 69 and Length 2 must satisfy");
  OpTest unpad("sequence_unpad");
  unpad.input("X", random_tensor<float>({2, 3, 2})).input("Length", i64s({1, 4}, Shape{2}));
  same_error(unpad, "sequence_unpad: Length[1] = 4 is outside [0, 3]");
  OpTest mask("sequence_mask");
  mask.input("X", LoDTensor(i64s({2, -1}, Shape{2})));
  same_error(mask, "sequence_mask: X ('X_0') holds a negative length -1 at 1");
  OpTest reset("lod_reset");
  reset.input("X", LoDTensor(random_tensor<float>({6, 2}))).input("Y", LoDTensor(i64s({0, 4, 2, 6}, Shape{4})));
  same_error(reset, "lod_reset: the LoD from Y's values does not fit X ('X_0') [6, 2]: level 0 decreases at position 2");
  OpTest pad("sequence_pad");
  pad.input("X", x).input("PadValue", Tensor::from<float>({0.f}, Shape{1})).attr("padded_length", 69);
  same_error(pad, "sequence_pad: padded_length = 69 is shorter than the longest sequence (70 rows)");
}
