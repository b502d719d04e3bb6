// tests/ops/sum.cpp: sum of a list of tensors: forward, in place on one input, grad, shape errors.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

TEST_CASE_TEMPLATE("sum: matches a plain loop for 1..4 inputs and sizes 1..100000", T, float, double) {
  for (int64_t n : {1, 3, 17, 64, 100000})
    for (size_t k : {1, 2, 4}) {
      CAPTURE(n);
      CAPTURE(k);
      std::vector<LoDTensor> xs;
      for (size_t i = 0; i < k; ++i) xs.push_back(random_tensor<T>({n}, -1, 1, i + 1));
      auto out = OpTest("sum").inputs("X", xs).run()["Out"];
      auto want = make_tensor<double>({n}, [&](int64_t e) {
        double s = 0;
        for (auto& x : xs) s += x.get(e);
        return s;
      });
      check_close(to_f64(out), want, 1e-6, 1e-6, "sum");
    }
}

TEST_CASE("sum: integers, LoD of X[0], unknown batch") {
  auto a = Tensor::from<int64_t>({1, 2, 3});
  auto b = Tensor::from<int64_t>({10, 20, 30});
  CHECK(OpTest("sum").inputs("X", {a, b, a}).run()["Out"].to_vector<int64_t>() == std::vector<int64_t>{12, 24, 36});
  LoDTensor x(random_tensor<double>({3, 2}), {{0, 1, 3}});
  auto out = OpTest("sum").inputs("X", {x, random_tensor<double>({3, 2}, -1, 1, 9)}).unknown_batch().run()["Out"];
  CHECK(out.lod() == LoD{{0, 1, 3}});
}

TEST_CASE("sum: Out may be one of the inputs (in place, as gradient accumulation uses it)") {
  Program p;
  Block& b = p.global_block();
  b.create_var("a", {.dtype = f64, .shape = Shape{3}});
  b.create_var("c", {.dtype = f64, .shape = Shape{3}});
  Operator op("sum");
  op.set_input("X", {"c", "a"}).set_output("Out", {"a"});
  add_op(b, op);
  Scope scope;
  Executor exe;
  auto r = exe.run(p, scope, {{"a", Tensor::from<double>({1, 2, 3})}, {"c", Tensor::from<double>({10, 20, 30})}}, {"a"});
  CHECK(r[0].to_vector<double>() == std::vector<double>{11, 22, 33});
}

TEST_CASE("sum: grad of every input is Out@GRAD (f64)") {
  OpTest("sum").inputs("X", {random_tensor<double>({2, 3}, -1, 1, 1), random_tensor<double>({2, 3}, -1, 1, 2), random_tensor<double>({2, 3}, -1, 1, 3)})
      .outputs("Out", 1).check_grad({"X"}, {"Out"});
}

TEST_CASE("sum: inputs of different shapes are an oar::Error naming them") {
  auto msg = error_of([] { OpTest("sum").inputs("X", {random_tensor<float>({2, 3}), random_tensor<float>({3, 2})}).build(); });
  test::check_contains(msg, {"sum", "[3, 2]", "[2, 3]"});
}
