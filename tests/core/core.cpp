// tests/core/core.cpp: DType numbering and sizes, Shape with unknown dims, Error with origin and context.
#include "pch.hpp"

using namespace oar;

TEST_CASE("dtype: Fluid's numbers, sizes, names and dtype_of") {
  CHECK(int(f32) == 5);
  CHECK(int(f64) == 6);
  CHECK(int(i64) == 3);
  CHECK(int(bf16) == 22);
  CHECK(size_of(f64) == 8);
  CHECK(size_of(bf16) == 2);
  CHECK(name(i32) == "i32");
  CHECK(dtype_of<double> == f64);
  CHECK(dtype_of<int64_t> == i64);
  CHECK(visit_dtype(f32, [](auto t) { return sizeof(typename decltype(t)::type); }) == 4);
  CHECK_THROWS_AS(visit_dtype(DType(99), [](auto) { return 0; }), Error);
  CHECK(is_valid_dtype(22));
  CHECK_FALSE(is_valid_dtype(7));
}

TEST_CASE("shape: unknown dims print as ?, numel is -1 when unknown, at() counts from the back") {
  Shape s{-1, 3, 4};
  CHECK(s.str() == "[?, 3, 4]");
  CHECK(s.numel() == -1);
  CHECK(s.numel(1, 3) == 12);
  CHECK(s.at(-1) == 4);
  CHECK_THROWS_AS(s.at(3), Error);
  CHECK_FALSE(s.known());
  CHECK(dims_compatible(-1, 5));
  CHECK_FALSE(dims_compatible(4, 5));
  CHECK(fmt::format("{}", Shape{2, 2}) == "[2, 2]");
}

TEST_CASE("error: the message starts with the user's line; context lines follow") {
  Error e("bad shape", Origin("model.cpp", 12, "fc"));
  CHECK(std::string(e.what()) == "model.cpp:12 (fc): bad shape");
  e.add_context("while running op #3");
  CHECK(std::string(e.what()) == "model.cpp:12 (fc): bad shape\n  while running op #3");
  Error f("no origin");
  f.add_context("while replaying fc", Origin("a.cpp", 3, "fc"));
  CHECK(f.origin().line == 3);
  CHECK_THROWS_WITH_AS(OAR_CHECK(1 == 2, "value {} is wrong", 7), "value 7 is wrong", Error);
}

TEST_CASE("names: one counter per prefix, from 0") {
  NameGenerator g;
  CHECK(g("fc") == "fc_0");
  CHECK(g("fc") == "fc_1");
  CHECK(g("fc_0.w") == "fc_0.w_0");
  g.reset();
  CHECK(g("fc") == "fc_0");
}
