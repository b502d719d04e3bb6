// tests/ops/lookup_table.cpp: lookup_table forward with padding, dense grad (check_grad and sums of rows),
// sparse grad as SelectedRows, and the out-of-range id error.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

TEST_CASE_TEMPLATE("lookup_table: Out[i] = W[Ids[i]], zeros at padding_idx", T, float, double) {
  for (int64_t n : {1, 3, 17, 64, 2000}) {
    auto w = random_tensor<T>({10, 8});
    auto ids = random_tensor<int64_t>({n, 1}, 0, 10, uint64_t(n));
    for (int64_t pad : {int64_t(-1), int64_t(3)}) {
      OpTest t("lookup_table");
      t.input("W", w).input("Ids", ids).attr("padding_idx", pad).unknown_batch();
      CHECK(t.build().global_block().var("Out_0").shape() == Shape{-1, 8});
      auto out = t.run()["Out"];
      REQUIRE(out.shape() == Shape{n, 8});
      for (int64_t i = 0; i < n; ++i) {
        int64_t id = int64_t(ids.get(i));
        for (int64_t j = 0; j < 8; ++j) REQUIRE(out.get(i * 8 + j) == (id == pad ? 0.0 : w.get(id * 8 + j)));
      }
    }
  }
}

TEST_CASE("lookup_table: Ids of rank 3 and LoD; padding_idx -2 means V - 2") {
  auto w = random_tensor<float>({6, 3});
  LoDTensor ids(Tensor::from<int64_t>({0, 4, 5, 1}, Shape{2, 2, 1}), {{0, 1, 2}});
  auto out = OpTest("lookup_table").input("W", w).input("Ids", ids).attr("padding_idx", int64_t(-2)).run()["Out"];
  CHECK(out.shape() == Shape{2, 2, 3});
  CHECK(out.lod() == ids.lod());
  for (int64_t j = 0; j < 3; ++j) {
    CHECK(out.get(3 + j) == 0.0);  // id 4 == 6 - 2
    CHECK(out.get(6 + j) == w.get(15 + j));
  }
}

TEST_CASE("lookup_table: dense grad (f64) by finite differences, padding rows get none") {
  auto w = random_tensor<double>({7, 4});
  auto ids = Tensor::from<int64_t>({2, 5, 2, 0, 6, 2}, Shape{6, 1});
  OpTest("lookup_table").input("W", w).input("Ids", ids).check_grad({"W"}, {"Out"});
  OpTest("lookup_table").input("W", w).input("Ids", ids).attr("padding_idx", int64_t(2)).check_grad({"W"}, {"Out"});
}

namespace {
/// Runs lookup_table and its grad with Out@GRAD = dout; returns the scope's value of W@GRAD through `f`.
template <class F>
void run_grad(const Tensor& w, const Tensor& ids, const Tensor& dout, bool sparse, int64_t pad, F&& f) {
  Program p = OpTest("lookup_table").input("W", w).input("Ids", ids).attr("is_sparse", sparse).attr("padding_idx", pad).build();
  Block& b = p.global_block();
  std::set<std::string> ng{"Ids_0"};
  GradContext gc(b.op(0), b, ng);
  auto gops = op_def("lookup_table").grad(gc);
  REQUIRE(gops.size() == 1);
  b.create_var("Out_0@GRAD", {.dtype = w.dtype(), .shape = dout.shape()});
  add_op(b, gops[0]);
  Scope scope;
  Executor exe;
  auto prep = exe.prepare(p, scope);
  exe.run(*prep, scope, {{"W_0", w}, {"Ids_0", ids}, {"Out_0@GRAD", dout}}, {});
  f(*prep->local_scope()->find("W_0@GRAD"));
}
}  // namespace

TEST_CASE_TEMPLATE("lookup_table: dense grad is the sum of Out@GRAD rows per id; sparse grad holds the rows", T, float, double) {
  const int64_t v = 9, d = 5, n = 40;
  auto w = random_tensor<T>({v, d});
  auto ids = random_tensor<int64_t>({n, 1}, 0, double(v), 3);
  auto dout = random_tensor<T>({n, d}, -1, 1, 4);
  for (int64_t pad : {int64_t(-1), int64_t(4)}) {
    std::vector<double> want(size_t(v * d), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      int64_t id = int64_t(ids.get(i));
      if (id == pad) continue;
      for (int64_t j = 0; j < d; ++j) want[size_t(id * d + j)] += dout.get(i * d + j);
    }
    Tensor expect = Tensor::from<double>(want, Shape{v, d});
    run_grad(w, ids, dout, false, pad, [&](Value& g) {
      REQUIRE(g.is_tensor());
      check_close(to_f64(g.tensor()), expect, 1e-5, 1e-5, "dense grad");
    });
    run_grad(w, ids, dout, true, pad, [&](Value& g) {
      REQUIRE(g.is_selected_rows());
      const SelectedRows& sr = g.selected_rows();
      CHECK(sr.height == v);
      std::vector<int64_t> rows;
      for (int64_t i = 0; i < n; ++i)
        if (int64_t(ids.get(i)) != pad) rows.push_back(int64_t(ids.get(i)));
      REQUIRE(sr.rows == rows);
      REQUIRE(sr.value.shape() == Shape{int64_t(rows.size()), d});
      // Summing the sparse rows gives the dense grad.
      std::vector<double> sum(size_t(v * d), 0.0);
      for (size_t r = 0; r < sr.rows.size(); ++r)
        for (int64_t j = 0; j < d; ++j) sum[size_t(sr.rows[r] * d + j)] += sr.value.get(int64_t(r) * d + j);
      check_close(Tensor::from<double>(sum, Shape{v, d}), expect, 1e-5, 1e-5, "sparse grad");
    });
  }
}

TEST_CASE("lookup_table: an id out of range is an oar::Error naming it; bad shapes and dtypes") {
  auto w = random_tensor<float>({5, 3});
  auto m = error_of([&] { OpTest("lookup_table").input("W", w).input("Ids", Tensor::from<int64_t>({1, 2, 9}, Shape{3, 1})).run(); });
  CHECK(m.find("lookup_table") != std::string::npos);
  CHECK(m.find("Ids[2] = 9 is out of range [0, 5)") != std::string::npos);
  auto m2 = error_of([&] { OpTest("lookup_table").input("W", w).input("Ids", Tensor::from<int64_t>({-3}, Shape{1, 1})).run(); });
  CHECK(m2.find("Ids[0] = -3") != std::string::npos);
  auto m3 = error_of([&] { OpTest("lookup_table").input("W", w).input("Ids", Tensor::from<int32_t>({1}, Shape{1, 1})).build(); });
  CHECK(m3.find("Ids must be i64") != std::string::npos);
  auto m4 = error_of([&] { OpTest("lookup_table").input("W", w).input("Ids", Tensor::from<int64_t>({1, 2}, Shape{1, 2})).build(); });
  CHECK(m4.find("[1, 2]") != std::string::npos);
  CHECK(OpTest("lookup_table").input("W", w).input("Ids", Tensor(Shape{0, 1}, i64)).run()["Out"].shape() == Shape{0, 3});
}
