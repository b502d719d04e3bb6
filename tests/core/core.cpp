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

TEST_CASE("place: parse_place and place_from_args read cpu, cuda and cuda:N; anything else is an oar::Error") {
  CHECK(parse_place("cpu") == cpu());
  CHECK(parse_place("cuda") == cuda(0));
  CHECK(parse_place("cuda:3") == cuda(3));
  CHECK(parse_place("cuda:3").str() == "cuda:3");
  for (const char* bad : {"gpu", "cuda:", "cuda:x", "cuda:-1", "cuda:1x", "CPU", ""})
    CHECK_THROWS_WITH_AS(parse_place(bad), doctest::Contains("is not a place: cpu, cuda or cuda:N"), Error);
  std::string a0 = "prog", a1 = "--device", a2 = "cuda:1", a3 = "--device=cpu";
  char* two[] = {a0.data(), a1.data(), a2.data()};
  CHECK(place_from_args(3, two) == cuda(1));
  char* eq[] = {a0.data(), a3.data()};
  CHECK(place_from_args(2, eq) == cpu());
  char* none[] = {a0.data()};
  CHECK(place_from_args(1, none, cuda(2)) == cuda(2));
  char* missing[] = {a0.data(), a1.data()};
  CHECK_THROWS_WITH_AS(place_from_args(2, missing), doctest::Contains("--device needs a place"), Error);
}
