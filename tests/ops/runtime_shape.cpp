// tests/ops/runtime_shape.cpp: shape and range, the ops whose outputs hold sizes known only at run time:
// values against plain lists, the empty cases, and bad bounds as errors naming the op.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {

template <class T>
LoDTensor one(T v) { return LoDTensor(Tensor::from<T>({v}, {1})); }
}  // namespace

TEST_CASE("shape: Input's dims as int32, whatever it holds, with the rank known when the program is built") {
  auto s = OpTest("shape").input("Input", LoDTensor(random_tensor<float>({3, 1, 5}))).run()["Out"];
  CHECK(s.dtype() == i32);
  CHECK(s.to_vector<int32_t>() == std::vector<int32_t>{3, 1, 5});
  auto ids = OpTest("shape").input("Input", LoDTensor(Tensor::from<int64_t>({1, 2, 3, 4, 5, 6}, {6}), {{0, 2, 6}})).run()["Out"];
  CHECK(ids.to_vector<int32_t>() == std::vector<int32_t>{6});
  CHECK(ids.lod_level() == 0);
  auto empty = OpTest("shape").input("Input", LoDTensor(Tensor(Shape{0, 4}, f64))).run()["Out"];
  CHECK(empty.to_vector<int32_t>() == std::vector<int32_t>{0, 4});
  Program p = OpTest("shape").input("Input", LoDTensor(random_tensor<float>({2, 7}))).unknown_batch().build();
  CHECK(p.global_block().var("Out_0").shape() == Shape{2});
  CHECK(!op_def("shape").grad);
}

TEST_CASE("range: ceil((End - Start) / Step) values from Start, none when Step points away from End") {
  auto run = [](LoDTensor b, LoDTensor e, LoDTensor d) { return OpTest("range").input("Start", b).input("End", e).input("Step", d).run()["Out"]; };
  auto up = run(one<int64_t>(0), one<int64_t>(5), one<int64_t>(1));
  CHECK(up.dtype() == i64);
  CHECK(up.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(run(one<int32_t>(10), one<int32_t>(1), one<int32_t>(-3)).to_vector<int32_t>() == std::vector<int32_t>{10, 7, 4});
  CHECK(run(one<int32_t>(1), one<int32_t>(8), one<int32_t>(3)).to_vector<int32_t>() == std::vector<int32_t>{1, 4, 7});
  CHECK(run(one<float>(0.5f), one<float>(2.0f), one<float>(0.5f)).to_vector<float>() == std::vector<float>{0.5f, 1.0f, 1.5f});
  CHECK(run(one<double>(1.0), one<double>(1.25), one<double>(0.1)).to_vector<double>().size() == 3);
  CHECK(run(one<int64_t>(3), one<int64_t>(3), one<int64_t>(1)).numel() == 0);
  CHECK(run(one<int64_t>(5), one<int64_t>(0), one<int64_t>(1)).numel() == 0);
  CHECK(run(one<float>(0.f), one<float>(4.f), one<float>(-1.f)).numel() == 0);
  CHECK(!op_def("range").grad);
}

TEST_CASE("range: a zero Step, mixed dtypes or a bound of several values is an oar::Error naming the op") {
  auto zero = error_of([&] { OpTest("range").input("Start", one<int64_t>(0)).input("End", one<int64_t>(4)).input("Step", one<int64_t>(0)).run(); });
  CHECK(contains(zero, "range: Step ('Step_0') is 0"));
  auto mixed = error_of([&] { OpTest("range").input("Start", one<int64_t>(0)).input("End", one<float>(4)).input("Step", one<int64_t>(1)).build(); });
  CHECK(contains(mixed, "End is f32, but Start is i64: the three must share a dtype"));
  auto many = error_of([&] {
    OpTest("range").input("Start", one<int64_t>(0)).input("End", LoDTensor(Tensor::from<int64_t>({4, 5}, {2}))).input("Step", one<int64_t>(1)).build();
  });
  CHECK(contains(many, "End must hold one value, got [2]"));
  auto text = error_of([&] { OpTest("range").input("Start", one<bool>(true)).input("End", one<bool>(true)).input("Step", one<bool>(true)).build(); });
  CHECK(contains(text, "Start must be i32, i64, f32 or f64, got bool"));
}
