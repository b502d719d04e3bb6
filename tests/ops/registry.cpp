// tests/ops/registry.cpp: the op registry (ops/registry.hpp): every schema is well formed, unknown types
// suggest near names, validate_op / add_op refuse bad ops with messages that name the op; the schema dump.
#include "pch.hpp"

#include <map>
#include <set>

#include "oar/ir/wire-inl.hpp"  // framework.proto messages through reflection (all inline)
#include "oar/ops/schema_dump.hpp"

using namespace oar;

TEST_CASE("registry: every schema is well formed") {
  const auto& reg = OpRegistry::instance();
  auto all = reg.all(true);
  REQUIRE(all.size() >= 3);
  for (const OpDef* d : all) {
    CAPTURE(d->type);
    CHECK_FALSE(d->type.empty());
    bool has_infer_shape = d->infer_shape != nullptr;  // (doctest cannot print function pointers)
    CHECK(has_infer_shape);
    CHECK(reg.find(d->type) == d);
    std::set<std::string> ins, outs, attrs;
    for (auto& s : d->inputs) {
      CHECK_FALSE(s.name.empty());
      CHECK_MESSAGE(ins.insert(s.name).second, "input slot listed twice: ", s.name);
    }
    for (auto& s : d->outputs) {
      CHECK_FALSE(s.name.empty());
      CHECK_MESSAGE(outs.insert(s.name).second, "output slot listed twice: ", s.name);
    }
    for (auto& a : d->attrs) {
      CAPTURE(a.name);
      CHECK_FALSE(a.name.empty());
      CHECK_MESSAGE(attrs.insert(a.name).second, "attribute listed twice: ", a.name);
      CHECK(a.name != "op_callstack");  // reserved: serialize.hpp stores the origin under that name
      if (a.dflt) {
        CHECK(attr_type(*a.dflt) == a.type);
        if (a.check) CHECK_MESSAGE(a.check(*a.dflt).empty(), "the default fails its own check");
      }
    }
    if (d->is_grad) {
      CHECK(d->type.ends_with("_grad"));
      const OpDef* fwd = reg.find(d->type.substr(0, d->type.size() - 5));
      REQUIRE(fwd != nullptr);
      bool fwd_has_grad = fwd->grad != nullptr;
      CHECK(fwd_has_grad);
    } else if (d->grad) {
      CHECK(reg.find(d->type + "_grad") != nullptr);
    }
    // The OpProto form parses back with every required field (a missing one fails the parse).
    auto pr = detail::WireTypes::instance().make("OpProto");
    REQUIRE(google::protobuf::TextFormat::ParseFromString(op_proto_text(*d), pr.get()));
    detail::Wire w(*pr);
    CHECK(w.get_string("type") == d->type);
    CHECK(size_t(w.size("inputs")) == d->inputs.size());
    CHECK(size_t(w.size("outputs")) == d->outputs.size());
    CHECK(size_t(w.size("attrs")) == d->attrs.size());
  }
  // all() without grads holds no derived grad op; with grads it is sorted by type.
  for (const OpDef* d : reg.all()) CHECK_FALSE(d->is_grad);
  for (size_t i = 1; i < all.size(); ++i) CHECK(all[i - 1]->type < all[i]->type);
}

TEST_CASE("registry: no two slot names share a Slot::hash (kernels find their slots by it)") {
  std::map<uint64_t, std::string> seen;
  auto add = [&](const std::string& name) {
    auto [it, fresh] = seen.emplace(Slot::hash(name), name);
    CHECK_MESSAGE((fresh || it->second == name), "slots '", name, "' and '", it->second, "' hash alike");
  };
  for (const OpDef* d : OpRegistry::instance().all(true)) {
    for (auto& s : d->inputs) add(s.name);
    for (auto& s : d->outputs) add(s.name);
  }
  CHECK(seen.size() > 50);
  static_assert(Slot("X").key != Slot("Y").key && Slot("X").key == Slot::hash("X"));
  // A slot the op does not have is absent, not some other slot.
  Scope scope;
  Operator op{std::string(ops::ReluOp::type)};
  op.set_input(ops::ReluOp::x, {"a"}).set_output(ops::ReluOp::out, {"b"});
  scope.var("a").tensor() = LoDTensor(Tensor::from<float>({1.f}));
  CpuContext dev;
  KernelContext c(op, scope, dev);
  CHECK(c.has_in(ops::ReluOp::x));
  CHECK_FALSE(c.has_in(ops::ReluOp::out));
  CHECK_FALSE(c.has_in(Slot("Y")));
  CHECK(c.in_name(ops::ReluOp::x) == "a");
}

TEST_CASE("registry: the ops the tests below rely on are registered") {
  for (const char* t : {"feed", "fetch", "mul", "mul_grad", "relu", "relu_grad", "leaky_relu", "clip"}) {
    CAPTURE(t);
    CHECK(OpRegistry::instance().find(t) != nullptr);
  }
  CHECK(op_def("mul_grad").is_grad);
  CHECK(op_def("feed").run_by == RunBy::feed);
}

TEST_CASE("registry: an unknown op type is an oar::Error that suggests similar names") {
  CHECK_THROWS_WITH_AS(op_def("mull"), "unknown op type 'mull'; similar: mul", Error);
  try {
    op_def("rel");
    FAIL("no error");
  } catch (const Error& e) {
    std::string m = e.what();
    CHECK(m.starts_with("unknown op type 'rel'; similar: "));
    CHECK(m.find("relu") != std::string::npos);
    CHECK(m.find("relu_grad") == std::string::npos);  // derived grad ops are never suggested
  }
  CHECK_THROWS_WITH_AS(op_def("zzzz"), "unknown op type 'zzzz'", Error);
}

namespace {
Operator make_mul() {
  Operator op("mul");
  op.set_input("X", {"x"}).set_input("Y", {"y"}).set_output("Out", {"out"});
  return op;
}
}  // namespace

TEST_CASE("validate_op: fills defaults and converts numeric attribute types") {
  Operator op = make_mul();
  validate_op(op);
  CHECK(op.attr<int32_t>("x_num_col_dims") == 1);
  CHECK(op.attr<int32_t>("y_num_col_dims") == 1);
  Operator wide = make_mul();
  wide.set_attr("x_num_col_dims", int64_t(2));
  validate_op(wide);
  CHECK(attr_type(wide.attr("x_num_col_dims")) == AttrType::INT);
  CHECK(wide.attr<int32_t>("x_num_col_dims") == 2);
  Operator leaky("leaky_relu");
  leaky.set_input("X", {"x"}).set_output("Out", {"y"}).set_attr("alpha", 1);  // an int literal for a float attr
  validate_op(leaky);
  CHECK(attr_type(leaky.attr("alpha")) == AttrType::FLOAT);
  CHECK(leaky.attr<float>("alpha") == 1.0f);
}

TEST_CASE("validate_op: each kind of bad op is refused with a message naming the op") {
  SUBCASE("missing required input") {
    Operator op("mul");
    op.set_input("X", {"x"}).set_output("Out", {"out"});
    CHECK_THROWS_WITH_AS(validate_op(op), "mul: input Y is required", Error);
  }
  SUBCASE("missing required output") {
    Operator op("relu");
    op.set_input("X", {"x"});
    CHECK_THROWS_WITH_AS(validate_op(op), "relu: output Out is required", Error);
  }
  SUBCASE("two variables in a non-duplicable slot") {
    Operator op = make_mul();
    op.set_input("X", {"a", "b"});
    CHECK_THROWS_WITH_AS(validate_op(op), "mul: input X takes one variable, got 2", Error);
    Operator out = make_mul();
    out.set_output("Out", {"o1", "o2"});
    CHECK_THROWS_WITH_AS(validate_op(out), "mul: output Out takes one variable, got 2", Error);
  }
  SUBCASE("unknown slot") {
    Operator op = make_mul();
    op.set_input("Bias", {"b"});
    CHECK_THROWS_WITH_AS(validate_op(op), "mul: unknown input slot Bias", Error);
  }
  SUBCASE("unknown attribute") {
    Operator op = make_mul();
    op.set_attr("transpose_x", true);
    CHECK_THROWS_WITH_AS(validate_op(op), "mul: unknown attribute 'transpose_x'", Error);
  }
  SUBCASE("wrong attribute type") {
    Operator op = make_mul();
    op.set_attr("x_num_col_dims", "two");
    CHECK_THROWS_WITH_AS(validate_op(op), "mul: attribute 'x_num_col_dims' must be int, got string \"two\"", Error);
    Operator leaky("leaky_relu");
    leaky.set_input("X", {"x"}).set_output("Out", {"y"}).set_attr("alpha", std::vector<float>{0.1f});
    CHECK_THROWS_WITH_AS(validate_op(leaky), "leaky_relu: attribute 'alpha' must be float, got floats [0.1]", Error);
  }
  SUBCASE("failed check") {
    Operator op = make_mul();
    op.set_attr("x_num_col_dims", 0);
    CHECK_THROWS_WITH_AS(validate_op(op), "mul: attribute x_num_col_dims = 0: must be >= 1", Error);
    Operator feed("feed");
    feed.set_input("X", {"feed"}).set_output("Out", {"x"}).set_attr("col", -1);
    CHECK_THROWS_WITH_AS(validate_op(feed), "feed: attribute col = -1: must be >= 0", Error);
  }
  SUBCASE("the error carries the op's origin") {
    Operator op = make_mul();
    op.set_attr("x_num_col_dims", 0);
    op.set_origin(Origin("model.cpp", 3, "fc"));
    CHECK_THROWS_WITH_AS(validate_op(op), "model.cpp:3 (fc): mul: attribute x_num_col_dims = 0: must be >= 1", Error);
  }
}

TEST_CASE("add_op: a refused op leaves no op behind") {
  Program p;
  Block& b = p.global_block();
  b.create_var("x", {.dtype = f32, .shape = Shape{2, 3}});
  b.create_var("y", {.dtype = f32, .shape = Shape{4, 5}});
  Operator bad = make_mul();
  bad.set_input("X", {"x"}).set_attr("x_num_col_dims", 0);
  CHECK_THROWS_AS(add_op(b, bad), Error);
  CHECK(b.num_ops() == 0);
  CHECK_FALSE(b.has_var("out"));  // validation runs before any variable is created
  // Shape inference fails (3 columns vs 4 rows): the op is removed again and the error names both shapes.
  CHECK_THROWS_WITH_AS(add_op(b, make_mul()), doctest::Contains("mul: X [2, 3] flattened at 1 has 3 columns but Y [4, 5]"), Error);
  CHECK(b.num_ops() == 0);
}

TEST_CASE("schema dump: readable text and OpProto text form") {
  CHECK(schema_str(op_def("mul")) ==
        "mul: matrix product of X and Y, each flattened to 2-D\n"
        "  inputs:  X, Y\n"
        "  outputs: Out\n"
        "  attrs:   x_num_col_dims: int = 1 (checked), y_num_col_dims: int = 1 (checked)\n"
        "  grad:    mul_grad\n");
  CHECK(schema_str(op_def("feed")).ends_with("  grad:    none\n  kernel:  none (run by the executor)\n"));
  CHECK(schema_str(op_def("mul_grad")) ==
        "mul_grad: gradient of mul\n"
        "  inputs:  X, Y, Out@GRAD\n"
        "  outputs: X@GRAD (dispensable), Y@GRAD (dispensable)\n"
        "  attrs:   x_num_col_dims: int = 1 (checked), y_num_col_dims: int = 1 (checked)\n"
        "  grad:    (is a derived grad op)\n");
  OpDef d("demo", "a demo");
  d.in("X", duplicable | dispensable, "the inputs").out("Out").out("XShape", intermediate).required_attr<std::string>("mode", "how");
  CHECK(schema_str(d) ==
        "demo: a demo\n"
        "  inputs:  X (duplicable, dispensable)\n"
        "  outputs: Out, XShape (intermediate)\n"
        "  attrs:   mode: string (required)\n"
        "  grad:    none\n");
  std::string t = op_proto_text(d);
  CHECK(t ==
        "type: \"demo\"\n"
        "inputs {\n  name: \"X\"\n  comment: \"the inputs\"\n  duplicable: true\n  dispensable: true\n}\n"
        "outputs {\n  name: \"Out\"\n  comment: \"\"\n}\n"
        "outputs {\n  name: \"XShape\"\n  comment: \"\"\n  intermediate: true\n}\n"
        "attrs {\n  name: \"mode\"\n  type: STRING\n  comment: \"how (required)\"\n}\n"
        "comment: \"a demo\"\n");
  std::string m = op_proto_text(op_def("mul"));
  CHECK(m.find("attrs {\n  name: \"x_num_col_dims\"\n  type: INT\n  comment: \"default: 1\"\n}\n") != std::string::npos);
}
