// tests/ops/clip_by_norm.cpp: clip_by_norm: below the bound X passes, above it the norm becomes max_norm.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

TEST_CASE_TEMPLATE("clip_by_norm: matches x * max_norm / max(norm, max_norm)", T, float, double) {
  for (int64_t n : {1, 3, 17, 64, 100000})
    for (float max_norm : {0.1f, 1.0f, 1000.0f}) {
      auto x = random_tensor<T>({n}, -1, 1, uint64_t(n));
      double norm = 0;
      for (int64_t i = 0; i < n; ++i) norm += x.get(i) * x.get(i);
      norm = std::sqrt(norm);
      double k = double(max_norm) / std::max(norm, double(max_norm));
      auto out = OpTest("clip_by_norm").input("X", x).attr("max_norm", max_norm).run()["Out"];
      check_close(to_f64(out), make_tensor<double>({n}, [&](int64_t i) { return x.get(i) * k; }), 1e-6, 1e-5, "clip_by_norm");
    }
}

TEST_CASE("clip_by_norm: max_norm is required and positive; no grad") {
  auto missing = error_of([] { OpTest("clip_by_norm").input("X", random_tensor<float>({3})).build(); });
  CHECK(missing.find("max_norm") != std::string::npos);
  auto neg = error_of([] { OpTest("clip_by_norm").input("X", random_tensor<float>({3})).attr("max_norm", -1.0f).build(); });
  CHECK(neg.find("must be > 0") != std::string::npos);
  CHECK(!op_def("clip_by_norm").grad);
  auto z = OpTest("clip_by_norm").input("X", Tensor(Shape{0}, f32)).attr("max_norm", 1.0f).run()["Out"];
  CHECK(z.numel() == 0);
}
