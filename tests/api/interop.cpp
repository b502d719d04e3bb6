// tests/api/interop.cpp: include/oar/interop/: zero-copy views between oar tensors and Eigen matrices or
// xtensor containers, both ways (a write through one is read through the other), the errors for layouts a
// tensor cannot view and for dtype mismatches, and a model fed from an Eigen matrix without a copy.
#include "pch.hpp"
#include "support/op_check.hpp"

#include <oar/interop/eigen.hpp>
#include <oar/interop/xtensor.hpp>

#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>

using namespace oar;

namespace {
using RowMajorF = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ColMajorF = Eigen::MatrixXf;
}  // namespace
using oar::test::error_of;

TEST_CASE("interop: a tensor from a row-major Eigen matrix shares its memory both ways") {
  RowMajorF m(2, 3);
  m << 1, 2, 3, 4, 5, 6;
  Tensor t = from_eigen(m);
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.dtype() == f32);
  CHECK(t.raw() == m.data());
  CHECK(t.get(5) == 6);
  m(1, 0) = 40;  // element (1, 0) is flat index 3
  CHECK(t.get(3) == 40);
  t.data<float>()[1] = -2;
  CHECK(m(0, 1) == -2);

  // A Map of a plain buffer, a column vector ([n, 1]), a fixed-size matrix and a whole-row block.
  std::vector<double> buf{1, 2, 3, 4};
  Tensor tm = from_eigen(Eigen::Map<Eigen::Matrix<double, 2, 2, Eigen::RowMajor>>(buf.data()));
  CHECK(tm.dtype() == f64);
  CHECK(tm.raw() == buf.data());
  Eigen::VectorXf v = Eigen::VectorXf::LinSpaced(4, 0, 3);
  Tensor tv = from_eigen(v);
  CHECK(tv.shape() == Shape{4, 1});
  CHECK(tv.raw() == v.data());
  Tensor rows = from_eigen(m.middleRows(1, 1));
  CHECK(rows.shape() == Shape{1, 3});
  CHECK(rows.raw() == m.data() + 3);

  // A column-major matrix's transpose is row-major over the same memory.
  ColMajorF c(2, 3);
  c << 1, 2, 3, 4, 5, 6;
  Tensor tt = from_eigen(c.transpose());
  CHECK(tt.shape() == Shape{3, 2});
  CHECK(tt.raw() == c.data());
  CHECK(tt.to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
}

TEST_CASE("interop: a tensor seen as an Eigen::Map shares its memory both ways") {
  Tensor t = Tensor::from<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  auto map = as_eigen<float>(t);
  CHECK(map.rows() == 2);
  CHECK(map.cols() == 3);
  CHECK(map.data() == t.raw());
  CHECK(map(1, 2) == 6);
  map(0, 2) = 30;
  CHECK(t.get(2) == 30);
  t.data<float>()[3] = 40;
  CHECK(map(1, 0) == 40);
  CHECK(map.row(1).sum() == 40 + 5 + 6);

  auto cmap = as_eigen<const float>(t);  // read-only
  CHECK(cmap(0, 2) == 30);
  CHECK(as_eigen<float>(Tensor::from<float>({1, 2, 3})).rows() == 3);             // rank 1: a column
  auto m3 = as_eigen<float>(Tensor(Shape{2, 3, 4}, f32));                           // rank 3: [d0, d1 d2]
  CHECK((m3.rows() == 2 && m3.cols() == 12));
  CHECK(as_eigen<int64_t>(Tensor::from<int64_t>({7}, Shape{})).size() == 1);         // rank 0: 1x1
}

TEST_CASE("interop: Eigen layouts and dtypes a tensor cannot view are errors naming the fix") {
  ColMajorF c(2, 3);
  std::string e = error_of([&] { from_eigen(c); });
  CHECK_MESSAGE(e.find("column-major") != std::string::npos, e);
  CHECK_MESSAGE(e.find("m.transpose()") != std::string::npos, e);
  CHECK_MESSAGE(e.find("RowMajor") != std::string::npos, e);

  RowMajorF m(4, 4);
  e = error_of([&] { from_eigen(m.block(0, 0, 2, 2)); });
  CHECK_MESSAGE(e.find("not contiguous") != std::string::npos, e);
  e = error_of([&] { from_eigen(m.col(1)); });
  CHECK_MESSAGE(e.find("not contiguous") != std::string::npos, e);

  Tensor t(Shape{2, 2}, f32);
  e = error_of([&] { as_eigen<double>(t); });
  CHECK_MESSAGE(e.find("holds f32") != std::string::npos, e);
  CHECK_MESSAGE(e.find("f64") != std::string::npos, e);
  e = error_of([&] { as_eigen<float>(Tensor()); });
  CHECK_MESSAGE(e.find("empty") != std::string::npos, e);
}

TEST_CASE("interop: an owner given to from_eigen keeps the matrix alive as long as the tensor") {
  Tensor t;
  std::weak_ptr<RowMajorF> watch;
  {
    auto m = std::make_shared<RowMajorF>(RowMajorF::Constant(3, 2, 7.f));
    watch = m;
    t = from_eigen(*m, m);
  }
  CHECK_FALSE(watch.expired());
  CHECK(t.get(5) == 7);
  Tensor copy = t.view(Shape{6});
  t = Tensor();
  CHECK_FALSE(watch.expired());
  copy = Tensor();
  CHECK(watch.expired());
}

TEST_CASE("interop: a tensor from an xtensor container shares its memory both ways") {
  xt::xarray<float> a = {{1, 2, 3}, {4, 5, 6}};
  Tensor t = from_xtensor(a);
  CHECK(t.shape() == Shape{2, 3});
  CHECK(t.dtype() == f32);
  CHECK(t.raw() == a.data());
  a(1, 0) = 40;
  CHECK(t.get(3) == 40);
  t.data<float>()[1] = -2;
  CHECK(a(0, 1) == -2);

  xt::xtensor<int64_t, 3> b = xt::zeros<int64_t>({2, 1, 3});
  Tensor tb = from_xtensor(b);
  CHECK(tb.shape() == Shape{2, 1, 3});
  CHECK(tb.dtype() == i64);
  b(1, 0, 2) = 9;
  CHECK(tb.get(5) == 9);
}

TEST_CASE("interop: a tensor seen through xt::adapt shares its memory both ways") {
  Tensor t = Tensor::from<float>({1, 2, 3, 4, 5, 6}, {3, 2});
  auto a = as_xtensor<float>(t);
  CHECK(a.dimension() == 2);
  CHECK(a.shape()[0] == 3);
  CHECK(a.data() == t.raw());
  CHECK(a(2, 1) == 6);
  a(0, 1) = 20;
  CHECK(t.get(1) == 20);
  t.data<float>()[4] = 50;
  CHECK(a(2, 0) == 50);
  CHECK(xt::sum(a)() == 1 + 20 + 3 + 4 + 50 + 6);

  auto f = as_xtensor<const float, 2>(t);  // fixed rank, read-only
  CHECK(f(2, 0) == 50);
}

TEST_CASE("interop: xtensor layouts, ranks and dtypes a tensor cannot view are errors") {
  xt::xarray<float, xt::layout_type::column_major> c = {{1, 2, 3}, {4, 5, 6}};
  std::string e = error_of([&] { from_xtensor(c); });
  CHECK_MESSAGE(e.find("column-major") != std::string::npos, e);
  CHECK_MESSAGE(e.find("row_major") != std::string::npos, e);

  // Rows 4 apart, columns 2 apart, the last element at 2 * 4 + 1 * 2 (xt::adapt takes the 6 elements' count).
  std::vector<float> buf(11);
  auto strided = xt::adapt(buf.data(), size_t(6), xt::no_ownership(), std::vector<size_t>{3, 2}, std::vector<size_t>{4, 2});
  e = error_of([&] { from_xtensor(strided); });
  CHECK_MESSAGE(e.find("not contiguous") != std::string::npos, e);
  CHECK_MESSAGE(e.find("[4, 2]") != std::string::npos, e);

  Tensor t(Shape{2, 2}, f64);
  e = error_of([&] { as_xtensor<float>(t); });
  CHECK_MESSAGE(e.find("holds f64") != std::string::npos, e);
  CHECK_MESSAGE(e.find("f32") != std::string::npos, e);
  e = error_of([&] { as_xtensor<double, 3>(t); });
  CHECK_MESSAGE(e.find("rank 2") != std::string::npos, e);
}

TEST_CASE("interop: a model is fed from an Eigen matrix without a copy, and its output read as a Map") {
  Tape tape;
  auto x = data("x", f32, {-1, 4});
  auto y = fc(x, 3).act(softmax).name("y");
  Model model(tape.program({y}));
  Evaluator ev(model);

  RowMajorF batch(5, 4);
  for (Eigen::Index i = 0; i < batch.size(); ++i) batch.data()[i] = float(i % 7) * 0.25f - 0.5f;
  std::vector<LoDTensor> out = ev.forward({{"x", from_eigen(batch)}});
  CHECK(ev.activation("x").raw() == batch.data());  // the executor read the matrix's own memory

  // The same values as a copy fed the usual way.
  Tensor copied = Tensor::from<float>(std::span<const float>(batch.data(), size_t(batch.size())), {5, 4});
  std::vector<LoDTensor> ref = ev.forward({{"x", copied}});
  auto probs = as_eigen<const float>(out[0]);
  auto want = as_eigen<const float>(ref[0]);
  REQUIRE(probs.rows() == 5);
  REQUIRE(probs.cols() == 3);
  CHECK(probs.isApprox(want));
  for (Eigen::Index r = 0; r < 5; ++r) CHECK(probs.row(r).sum() == doctest::Approx(1.0));

  // Writing the matrix changes the next run's input: the feed still is that memory.
  batch.setZero();
  std::vector<LoDTensor> out0 = ev.forward({{"x", from_eigen(batch)}});
  auto zero = as_eigen<const float>(out0[0]);  // valid while out0[0] lives
  CHECK_FALSE(zero.isApprox(want));
  CHECK(zero.row(0).isApprox(zero.row(4)));  // zero rows in, equal rows out
}
