// tests/ir/program.cpp: Program / Block / Operator / Variable accessors, serialization and errors.
#include "pch.hpp"

using namespace oar;

TEST_CASE("program: blocks know their parent; create_block and rollback move the current block") {
  Program p;
  CHECK(p.num_blocks() == 1);
  CHECK(p.global_block().parent() == nullptr);
  Block& b1 = p.create_block();
  CHECK(b1.parent_idx() == 0);
  Block& b2 = p.create_block();
  CHECK(b2.parent_idx() == 1);
  CHECK(&p.current_block() == &b2);
  p.rollback();
  CHECK(&p.current_block() == &b1);
  p.rollback();
  CHECK(p.current_block().idx() == 0);
}

TEST_CASE("block: create_var returns the existing var; a conflicting redefinition is refused") {
  Program p;
  Block& b = p.global_block();
  Variable& x = b.create_var("x", {.dtype = f32, .shape = Shape{-1, 3}});
  Variable& again = b.create_var("x", {.dtype = f32});
  CHECK(&x == &again);
  CHECK_THROWS_WITH_AS(b.create_var("x", {.dtype = f64}), doctest::Contains("redefining it with dtype f64 is refused"), Error);
  CHECK_THROWS_AS(b.create_var("x", {.shape = Shape{-1, 4}}), Error);
}

TEST_CASE("block: parameters land in the global block; find_var walks through parents") {
  Program p;
  Block& sub = p.create_block();
  Parameter& w = sub.create_parameter("w", f32, {3, 4});
  CHECK(p.global_block().has_var("w"));
  CHECK_FALSE(sub.has_var("w"));
  CHECK(sub.find_var("w") == &w);
  CHECK(w.persistable());
  CHECK(w.is_parameter());
  CHECK_THROWS_AS(sub.create_parameter("bad", f32, {-1, 4}), Error);
}

TEST_CASE("program: serialize/parse round trip keeps every attribute type") {
  Program p;
  Block& b = p.global_block();
  b.create_var("x", {.dtype = f32, .shape = Shape{-1, 3}, .lod_level = 1});
  b.create_var("y", {.dtype = i64, .shape = Shape{2}});
  Operator op("custom");
  op.set_input("X", {"x"}).set_output("Out", {"y"});
  op.set_attr("i", 3).set_attr("f", 0.5f).set_attr("s", std::string("hi")).set_attr("ints", std::vector<int32_t>{1, 2});
  op.set_attr("floats", std::vector<float>{1.5f}).set_attr("strings", std::vector<std::string>{"a", "b"});
  op.set_attr("b", true).set_attr("bools", std::vector<bool>{true, false}).set_attr("blk", BlockRef{0});
  op.set_attr("l", int64_t(1) << 40).set_attr("blks", BlockRefs{{0}}).set_attr("longs", std::vector<int64_t>{-1, 5});
  op.set_origin(Origin("model.cpp", 12, "fc"));
  b.append_op(op);
  Program q = parse_program(serialize(p));
  CHECK(q == p);
  CHECK(q.global_block().op(0).origin().line == 12);
  CHECK(q.global_block().var("x").lod_level() == 1);
  CHECK(q.global_block().var("y").dtype() == i64);
  Program t = parse_program_text(to_text(p));
  CHECK(t == p);
}

TEST_CASE("program: truncated or garbage bytes give an oar::Error") {
  Program p;
  p.global_block().create_var("x", {.dtype = f32, .shape = Shape{2}});
  std::string bytes = serialize(p);
  CHECK_THROWS_AS(parse_program(bytes.substr(0, bytes.size() / 2)), Error);
  CHECK_THROWS_AS(parse_program("this is not a program at all"), Error);
  CHECK_THROWS_AS(load_program("/nonexistent/oar/program"), Error);
}
