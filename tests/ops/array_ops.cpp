// tests/ops/array_ops.cpp: the ops While loops and DynamicRNN are built from: the comparisons and logical ops
// (through the op harness), tensor arrays (write_to_array, read_from_array, lod_array_length) and rank tables
// (lod_rank_table, max_sequence_len, lod_tensor_to_array, array_to_lod_tensor, shrink_rnn_memory,
// reorder_lod_tensor_by_rank) in small programs run by the Executor: plain-loop references with empty,
// length-1 and tied sequences, f64 gradients against central differences, an end-to-end program built from the
// layers, arrays emptied between runs, and the error texts of bad input.
#include <functional>

#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {

// ---- helpers

/// A random f64 [N, d] tensor whose one-level LoD has the sequence `lengths`.
LoDTensor sequences(const std::vector<size_t>& lengths, int64_t d, uint64_t seed) {
  int64_t n = 0;
  for (size_t l : lengths) n += int64_t(l);
  return LoDTensor::from_lengths(random_tensor<double>({n, d}, -1, 1, seed), {lengths});
}

Tensor index_tensor(int64_t i) { return Tensor::from<int64_t>({i}, {1}); }

/// Appends op `type` with inputs and outputs by slot (variables the op writes are created by add_op).
void add(Block& b, std::string type, std::vector<std::pair<std::string_view, std::vector<std::string>>> ins,
         std::vector<std::pair<std::string_view, std::vector<std::string>>> outs, std::map<std::string, Attribute> attrs = {}) {
  Operator op(std::move(type));
  for (auto& [s, n] : ins) op.set_input(std::string(s), n);
  for (auto& [s, n] : outs) op.set_output(std::string(s), n);
  for (auto& [k, v] : attrs) op.set_attr(k, v);
  add_op(b, std::move(op));
}

/// Declares a fed variable shaped like `t` with an unknown first dim.
void declare(Block& b, const std::string& name, const LoDTensor& t) {
  Shape s = t.shape();
  if (s.rank() > 1) s[0] = -1;
  b.create_var(name, {.dtype = t.dtype(), .shape = s, .lod_level = t.lod_level()});
}

/// Declares the fed sequences "x" and their rank table "t" (lod_rank_table).
void declare_ranked(Block& b, const LoDTensor& x) {
  declare(b, "x", x);
  add(b, "lod_rank_table", {{"X", {"x"}}}, {{"Out", {"t"}}});
}

/// The rank table the op must give, by repeated selection (not a sort): longest remaining first, the lowest
/// index among equals.
std::vector<int64_t> expected_table(const std::vector<size_t>& lengths) {
  std::vector<int64_t> rows;
  std::vector<bool> used(lengths.size(), false);
  for (size_t k = 0; k < lengths.size(); ++k) {
    size_t best = lengths.size();
    for (size_t i = 0; i < lengths.size(); ++i)
      if (!used[i] && (best == lengths.size() || lengths[i] > lengths[best])) best = i;
    used[best] = true;
    rows.push_back(int64_t(best));
    rows.push_back(int64_t(lengths[best]));
  }
  return rows;
}

/// The steps of a LoD tensor by plain loops: entry t holds row t of each sequence longer than t, in table order.
std::vector<Tensor> expected_steps(const LoDTensor& x, const std::vector<size_t>& lengths) {
  const auto table = expected_table(lengths);
  const auto& off = x.lod()[0];
  const int64_t d = x.dim(1);
  size_t longest = 0;
  for (size_t l : lengths) longest = std::max(longest, l);
  std::vector<Tensor> steps;
  for (size_t t = 0; t < longest; ++t) {
    std::vector<double> v;
    int64_t k = 0;
    for (size_t r = 0; r < lengths.size(); ++r) {
      const size_t s = size_t(table[2 * r]);
      if (lengths[s] <= t) continue;
      ++k;
      for (int64_t j = 0; j < d; ++j) v.push_back(x.get(int64_t(off[s] + t) * d + j));
    }
    steps.push_back(Tensor::from<double>(v, {k, d}));
  }
  return steps;
}

/// A program run once: its prepared block (to reach the arrays among its temporaries) and the fetches.
struct Run {
  Executor exe;
  Scope scope;
  std::shared_ptr<PreparedBlock> prep;
  std::vector<LoDTensor> out;
  Run(const Program& p, const FeedMap& feeds, const std::vector<std::string>& fetch) {
    prep = exe.prepare(p, scope);
    out = exe.run(*prep, scope, feeds, fetch);
  }
  Value::TensorList& array(const std::string& name) { return prep->local_scope()->find(name)->list(); }
};

/// The gradient of "loss" with respect to the fed f64 `wrt`: append_backward's against central differences of
/// the forward program. Returns the analytic one.
Tensor check_grad(const Program& fwd, const FeedMap& feeds, const std::string& wrt) {
  Program g = fwd;
  append_backward(g, "loss");
  Executor exe;
  Scope scope;
  const Tensor analytic = exe.run(g, scope, feeds, {grad_var_name(wrt)})[0];
  const Tensor& x = feeds.at(wrt);
  REQUIRE_MESSAGE(analytic.shape() == x.shape(), wrt << "@GRAD has shape " << analytic.shape().str());
  const double delta = 1e-6;
  Scope fs;
  for (int64_t e = 0; e < x.numel(); ++e) {
    FeedMap f = feeds;
    auto at = [&](double v) {
      LoDTensor moved(x.clone(), feeds.at(wrt).lod());
      moved.data<double>()[e] = v;
      f[wrt] = moved;
      return exe.run(fwd, fs, f, {"loss"})[0].get(0);
    };
    const double v = x.get(e);
    const double num = (at(v + delta) - at(v - delta)) / (2 * delta);
    CAPTURE(e);
    CHECK(analytic.get(e) == doctest::Approx(num).epsilon(1e-6));
  }
  return analytic;
}

/// loss = mean(y * w), w a fed f64 weight shaped like y, so that the gradient tells the rows apart.
void add_weighted_loss(Block& b, const std::string& y, const std::string& w) {
  b.create_var(w, {.dtype = DType::f64, .shape = Shape{-1, 2}}).set_stop_gradient(true);
  add(b, "elementwise_mul", {{"X", {y}}, {"Y", {w}}}, {{"Out", {"yw"}}});
  add(b, "mean", {{"X", {"yw"}}}, {{"Out", {"loss"}}});
}

bool kind_is(const Program& p, const std::string& n, VarKind k) { return p.global_block().var(n).kind() == k; }

const std::vector<size_t> kLengths = {2, 0, 3, 1, 3};  // an empty and a length-1 sequence, ties at 3

}  // namespace

// ---- comparisons and logical ops

TEST_CASE_TEMPLATE("compare ops: each of the six against a plain loop, same shapes and Y broadcast from axis 1", T, int32_t, int64_t, float, double) {
  const std::vector<std::pair<std::string, std::function<bool(double, double)>>> cases = {
      {"less_than", std::less<>()},    {"less_equal", std::less_equal<>()}, {"greater_than", std::greater<>()},
      {"greater_equal", std::greater_equal<>()}, {"equal", std::equal_to<>()},   {"not_equal", std::not_equal_to<>()}};
  // Small integers, so that equal elements occur in every dtype.
  const Tensor x = make_tensor<T>({2, 3, 4}, [](int64_t i) { return (i * 7) % 5; });
  const Tensor ysame = make_tensor<T>({2, 3, 4}, [](int64_t i) { return (i * 3) % 4; });
  const Tensor ybc = make_tensor<T>({3}, [](int64_t i) { return i + 1; });
  for (auto& [type, cmp] : cases) {
    CAPTURE(type);
    auto same = OpTest(type).input("X", x).input("Y", ysame).run().at("Out");
    REQUIRE(same.dtype() == DType::boolean);
    REQUIRE(same.shape() == x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) CHECK(same.data<bool>()[i] == cmp(x.get(i), ysame.get(i)));
    auto bc = OpTest(type).input("X", x).input("Y", ybc).attr("axis", 1).run().at("Out");
    for (int64_t i = 0; i < x.numel(); ++i) CHECK(bc.data<bool>()[i] == cmp(x.get(i), ybc.get((i / 4) % 3)));
  }
}

TEST_CASE("compare ops: X's LoD is kept; mismatched dtypes, shapes and bool inputs are oar::Errors naming the op") {
  LoDTensor x = LoDTensor::from_lengths(Tensor::from<float>({1, 2, 3}, {3, 1}), {{2, 1}});
  auto out = OpTest("less_equal").input("X", x).input("Y", LoDTensor(Tensor::from<float>({2}, {1}))).run().at("Out");
  CHECK(out.lod() == x.lod());
  CHECK(out.to_vector<bool>() == std::vector<bool>{true, true, false});
  CHECK_THROWS_WITH_AS(OpTest("less_than").input("X", Tensor::from<float>({1, 2})).input("Y", Tensor::from<double>({1, 2})).run(),
                       doctest::Contains("less_than: X is f32 but Y is f64"), Error);
  CHECK_THROWS_WITH_AS(OpTest("equal").input("X", Tensor::from<float>({1, 2, 3, 4}, {2, 2})).input("Y", Tensor::from<float>({1, 2, 3}, {3})).run(),
                       doctest::Contains("equal: Y [3] does not match X [2, 2]"), Error);
  CHECK_THROWS_WITH_AS(OpTest("greater_than").input("X", Tensor::from<bool>({true})).input("Y", Tensor::from<bool>({false})).run(),
                       doctest::Contains("greater_than: compares i32, i64, f32 or f64 tensors, got bool"), Error);
}

TEST_CASE("logical ops: and, or, xor, not over every pair of truth values; non-bool input is an oar::Error") {
  const Tensor x = Tensor::from<bool>({false, false, true, true}, {2, 2});
  const Tensor y = Tensor::from<bool>({false, true, false, true}, {2, 2});
  CHECK(OpTest("logical_and").input("X", x).input("Y", y).run().at("Out").to_vector<bool>() == std::vector<bool>{false, false, false, true});
  CHECK(OpTest("logical_or").input("X", x).input("Y", y).run().at("Out").to_vector<bool>() == std::vector<bool>{false, true, true, true});
  CHECK(OpTest("logical_xor").input("X", x).input("Y", y).run().at("Out").to_vector<bool>() == std::vector<bool>{false, true, true, false});
  CHECK(OpTest("logical_not").input("X", x).run().at("Out").to_vector<bool>() == std::vector<bool>{true, true, false, false});
  CHECK_THROWS_WITH_AS(OpTest("logical_and").input("X", Tensor::from<float>({1})).input("Y", y).run(),
                       doctest::Contains("logical_and: X and Y must be bool, got f32 and bool"), Error);
  CHECK_THROWS_WITH_AS(OpTest("logical_or").input("X", x).input("Y", Tensor::from<bool>({true, false})).run(),
                       doctest::Contains("logical_or: X [2, 2] and Y [2] must have the same shape"), Error);
  CHECK_THROWS_WITH_AS(OpTest("logical_not").input("X", Tensor::from<int64_t>({1})).run(), doctest::Contains("logical_not: X must be bool, got i64"), Error);
}

// ---- tensor arrays

TEST_CASE("write_to_array / read_from_array / lod_array_length: entries are copies with their LoD, holes stay empty, bad indices are errors") {
  Program p;
  Block& b = p.global_block();
  const LoDTensor x0 = sequences({1, 2}, 2, 1), x2 = sequences({3}, 2, 2);
  declare(b, "x0", x0);
  declare(b, "x2", x2);
  for (auto n : {"i0", "i2", "ir"}) b.create_var(n, {.dtype = DType::i64, .shape = Shape{1}});
  add(b, "write_to_array", {{"X", {"x0"}}, {"I", {"i0"}}}, {{"Out", {"A"}}});
  add(b, "write_to_array", {{"X", {"x2"}}, {"I", {"i2"}}}, {{"Out", {"A"}}});
  add(b, "lod_array_length", {{"X", {"A"}}}, {{"Out", {"len"}}});
  add(b, "read_from_array", {{"X", {"A"}}, {"I", {"ir"}}}, {{"Out", {"r"}}});
  CHECK(kind_is(p, "A", VarKind::lod_tensor_array));
  CHECK(b.var("A").dtype() == DType::f64);
  CHECK(b.var("r").shape() == Shape{-1, 2});
  CHECK(b.var("r").lod_level() == 1);
  const FeedMap feeds = {{"x0", x0}, {"x2", x2}, {"i0", index_tensor(0)}, {"i2", index_tensor(2)}, {"ir", index_tensor(2)}};
  Run r(p, feeds, {"len", "r"});
  CHECK(r.out[0].data<int64_t>()[0] == 3);
  check_close(r.out[1], x2, 0, 0, "read of entry 2");
  CHECK(r.out[1].lod() == x2.lod());
  auto& a = r.array("A");
  REQUIRE(a.size() == 3);
  check_close(a[0], x0, 0, 0, "entry 0");
  CHECK(a[0].lod() == x0.lod());
  CHECK_FALSE(a[1].initialized());
  CHECK(a[0].storage() != x0.storage());  // a copy, not a view of the fed tensor

  FeedMap bad = feeds;
  bad["ir"] = index_tensor(5);
  CHECK_THROWS_WITH_AS(r.exe.run(*r.prep, r.scope, bad, {"r"}), doctest::Contains("read_from_array: index 5 is out of range of the array 'A' (3 entries)"),
                       Error);
  bad["ir"] = index_tensor(1);
  CHECK_THROWS_WITH_AS(r.exe.run(*r.prep, r.scope, bad, {"r"}), doctest::Contains("read_from_array: entry 1 of the array 'A' was never written"), Error);
  bad["ir"] = index_tensor(-1);
  CHECK_THROWS_WITH_AS(r.exe.run(*r.prep, r.scope, bad, {"r"}), doctest::Contains("read_from_array: I ('ir') is a negative index -1"), Error);

  // Build-time checks: the index's dtype, reading a plain variable, writing another dtype into the array.
  b.create_var("fi", {.dtype = DType::f32, .shape = Shape{1}});
  CHECK_THROWS_WITH_AS(add(b, "write_to_array", {{"X", {"x0"}}, {"I", {"fi"}}}, {{"Out", {"A"}}}),
                       doctest::Contains("write_to_array: I ('fi') is an index and must be i64 (or i32), got f32"), Error);
  CHECK_THROWS_WITH_AS(add(b, "read_from_array", {{"X", {"x0"}}, {"I", {"i0"}}}, {{"Out", {"r2"}}}),
                       doctest::Contains("read_from_array: X ('x0') must be a tensor array"), Error);
  b.create_var("xf", {.dtype = DType::f32, .shape = Shape{-1, 2}});
  CHECK_THROWS_WITH_AS(add(b, "write_to_array", {{"X", {"xf"}}, {"I", {"i0"}}}, {{"Out", {"A"}}}),
                       doctest::Contains("write_to_array: X is f32 but the array 'A' holds f64"), Error);
}

TEST_CASE("sum and fill_zeros_like over tensor arrays: entry by entry, empty entries skipped, as long as the longest") {
  Program p;
  Block& b = p.global_block();
  const LoDTensor u = sequences({2}, 2, 3), v = sequences({2}, 2, 4), w = sequences({1}, 2, 5);
  for (auto& [n, t] : std::vector<std::pair<std::string, LoDTensor>>{{"u", u}, {"v", v}, {"w", w}}) declare(b, n, t);
  for (int64_t i : {0, 1, 3}) b.create_var("i" + std::to_string(i), {.dtype = DType::i64, .shape = Shape{1}});
  add(b, "write_to_array", {{"X", {"u"}}, {"I", {"i0"}}}, {{"Out", {"A"}}});  // A = [u, -, -, w]
  add(b, "write_to_array", {{"X", {"w"}}, {"I", {"i3"}}}, {{"Out", {"A"}}});
  add(b, "write_to_array", {{"X", {"v"}}, {"I", {"i0"}}}, {{"Out", {"B"}}});  // B = [v, v]
  add(b, "write_to_array", {{"X", {"v"}}, {"I", {"i1"}}}, {{"Out", {"B"}}});
  add(b, "sum", {{"X", {"A", "B"}}}, {{"Out", {"S"}}});
  add(b, "fill_zeros_like", {{"X", {"A"}}}, {{"Out", {"Z"}}});
  CHECK(kind_is(p, "S", VarKind::lod_tensor_array));
  CHECK(kind_is(p, "Z", VarKind::lod_tensor_array));
  Run r(p, {{"u", u}, {"v", v}, {"w", w}, {"i0", index_tensor(0)}, {"i1", index_tensor(1)}, {"i3", index_tensor(3)}}, {});
  auto& s = r.array("S");
  REQUIRE(s.size() == 4);
  std::vector<double> uv;
  for (int64_t i = 0; i < u.numel(); ++i) uv.push_back(u.get(i) + v.get(i));
  check_close(s[0], Tensor::from<double>(uv, u.shape()), 1e-12, 0, "S[0] = u + v");
  check_close(s[1], v, 0, 0, "S[1] = v");
  CHECK_FALSE(s[2].initialized());
  check_close(s[3], w, 0, 0, "S[3] = w");
  auto& z = r.array("Z");
  REQUIRE(z.size() == 4);
  check_close(z[0], make_tensor<double>(u.shape(), [](int64_t) { return 0.0; }), 0, 0, "Z[0]");
  CHECK_FALSE(z[1].initialized());
  CHECK(z[3].shape() == w.shape());

  Block& b2 = p.global_block();
  CHECK_THROWS_WITH_AS(add(b2, "sum", {{"X", {"A", "u"}}}, {{"Out", {"S2"}}}), doctest::Contains("sum: X[1] ('u') is not a tensor array but X[0] ('A') is"), Error);
}

// ---- rank tables

TEST_CASE("lod_rank_table / max_sequence_len: longest first, ties in original order, empty sequences last") {
  for (const auto& lengths : std::vector<std::vector<size_t>>{kLengths, {1}, {0, 0}, {}}) {
    CAPTURE(lengths.size());
    Program p;
    Block& b = p.global_block();
    const LoDTensor x = sequences(lengths, 2, 9);
    declare_ranked(b, x);
    add(b, "max_sequence_len", {{"RankTable", {"t"}}}, {{"Out", {"m"}}});
    CHECK(kind_is(p, "t", VarKind::lod_rank_table));
    Run r(p, {{"x", x}}, {"t", "m"});
    CHECK(r.out[0].shape() == Shape{int64_t(lengths.size()), 2});
    CHECK(r.out[0].to_vector<int64_t>() == expected_table(lengths));
    size_t longest = 0;
    for (size_t l : lengths) longest = std::max(longest, l);
    CHECK(r.out[1].data<int64_t>()[0] == int64_t(longest));
  }
  CHECK(expected_table(kLengths) == std::vector<int64_t>{2, 3, 4, 3, 0, 2, 3, 1, 1, 0});  // the reference itself, by hand
}

TEST_CASE("lod_rank_table: a tensor without LoD, or with two levels, is an oar::Error saying one level is supported") {
  Program p;
  Block& b = p.global_block();
  b.create_var("x", {.dtype = DType::f32, .shape = Shape{-1, 2}});
  add(b, "lod_rank_table", {{"X", {"x"}}}, {{"Out", {"t"}}});
  Executor exe;
  Scope scope;
  CHECK_THROWS_WITH_AS(exe.run(p, scope, {{"x", Tensor::from<float>({1, 2, 3, 4}, {2, 2})}}, {"t"}),
                       doctest::Contains("lod_rank_table: X ('x') has 0 LoD levels; lod_rank_table supports tensors with exactly one (level 0)"), Error);
  b.create_var("x2", {.dtype = DType::f32, .shape = Shape{-1, 2}, .lod_level = 2});
  CHECK_THROWS_WITH_AS(add(b, "lod_rank_table", {{"X", {"x2"}}}, {{"Out", {"t2"}}}),
                       doctest::Contains("lod_rank_table: X ('x2') has 2 LoD levels; only tensors with exactly one are supported"), Error);
  CHECK_THROWS_WITH_AS(add(b, "lod_rank_table", {{"X", {"x"}}}, {{"Out", {"t3"}}}, {{"level", int32_t(1)}}),
                       doctest::Contains("lod_rank_table: attribute level = 1: must be 0"), Error);
  CHECK_THROWS_WITH_AS(add(b, "max_sequence_len", {{"RankTable", {"x"}}}, {{"Out", {"m"}}}),
                       doctest::Contains("max_sequence_len: RankTable ('x') must be a rank table"), Error);
}

TEST_CASE("lod_tensor_to_array / array_to_lod_tensor: steps in rank order against a plain loop, and back to the same tensor and LoD") {
  Program p;
  Block& b = p.global_block();
  const LoDTensor x = sequences(kLengths, 2, 11);
  declare_ranked(b, x);
  add(b, "lod_tensor_to_array", {{"X", {"x"}}, {"RankTable", {"t"}}}, {{"Out", {"A"}}});
  add(b, "array_to_lod_tensor", {{"X", {"A"}}, {"RankTable", {"t"}}}, {{"Out", {"y"}}});
  CHECK(kind_is(p, "A", VarKind::lod_tensor_array));
  CHECK(b.var("y").lod_level() == 1);
  Run r(p, {{"x", x}}, {"y"});
  const auto steps = expected_steps(x, kLengths);
  auto& a = r.array("A");
  REQUIRE(a.size() == steps.size());
  for (size_t t = 0; t < steps.size(); ++t) {
    check_close(a[t], steps[t], 0, 0, "step " + std::to_string(t));
    CHECK(a[t].lod().empty());
  }
  CHECK(a[0].dim(0) == 4);  // every sequence but the empty one
  CHECK(a[2].dim(0) == 2);  // the two of length 3
  check_close(r.out[0], x, 0, 0, "round trip");
  CHECK(r.out[0].lod() == x.lod());
}

TEST_CASE("lod_tensor_to_array / array_to_lod_tensor: a table of other sequences, a LoD that disagrees and a short array are oar::Errors") {
  Program p;
  Block& b = p.global_block();
  const LoDTensor x = sequences(kLengths, 2, 11), other = sequences({4, 1}, 2, 12), same_rows = sequences({3, 0, 2, 1, 3}, 2, 13);
  declare(b, "x", x);
  declare(b, "o", other);
  b.create_var("i1", {.dtype = DType::i64, .shape = Shape{1}});
  add(b, "lod_rank_table", {{"X", {"o"}}}, {{"Out", {"t"}}});
  add(b, "lod_tensor_to_array", {{"X", {"x"}}, {"RankTable", {"t"}}}, {{"Out", {"A"}}});
  Executor exe;
  Scope scope;
  CHECK_THROWS_WITH_AS(exe.run(p, scope, {{"x", x}, {"o", other}}, {}),
                       doctest::Contains("lod_tensor_to_array: X ('x') has 9 rows, but the lengths of the rank table 't' add up to 5"), Error);
  CHECK_THROWS_WITH_AS(exe.run(p, scope, {{"x", x}, {"o", same_rows}}, {}),
                       doctest::Contains("lod_tensor_to_array: the LoD of X ('x') does not match the rank table 't': sequence 0 has 2 rows, the table says 3"),
                       Error);

  Program q;
  Block& c = q.global_block();
  declare(c, "x", x);
  declare(c, "e", other);
  c.create_var("i0", {.dtype = DType::i64, .shape = Shape{1}});
  add(c, "lod_rank_table", {{"X", {"x"}}}, {{"Out", {"t"}}});
  add(c, "write_to_array", {{"X", {"e"}}, {"I", {"i0"}}}, {{"Out", {"A"}}});
  add(c, "array_to_lod_tensor", {{"X", {"A"}}, {"RankTable", {"t"}}}, {{"Out", {"y"}}});
  Scope s2;
  CHECK_THROWS_WITH_AS(exe.run(q, s2, {{"x", x}, {"e", other}, {"i0", index_tensor(0)}}, {"y"}),
                       doctest::Contains("array_to_lod_tensor: the array 'A' has 1 entries, but the rank table's longest sequence has 3 steps"), Error);
  CHECK_THROWS_WITH_AS(exe.run(q, s2, {{"x", sequences({1, 0, 1}, 2, 3)}, {"e", other}, {"i0", index_tensor(0)}}, {"y"}),
                       doctest::Contains("array_to_lod_tensor: entry 0 of the array 'A' is f64 [5, 2], but the rank table has 2 sequences at step 0"), Error);
}

TEST_CASE("shrink_rnn_memory: the rows of the sequences longer than i, for every i; too few rows is an oar::Error") {
  Program p;
  Block& b = p.global_block();
  const LoDTensor x = sequences(kLengths, 2, 21);
  const LoDTensor mem = LoDTensor(random_tensor<double>({5, 2}, -1, 1, 22));
  declare_ranked(b, x);
  declare(b, "mem", mem);
  b.create_var("i", {.dtype = DType::i64, .shape = Shape{1}});
  add(b, "shrink_rnn_memory", {{"X", {"mem"}}, {"I", {"i"}}, {"RankTable", {"t"}}}, {{"Out", {"s"}}});
  Executor exe;
  Scope scope;
  const std::vector<int64_t> k = {4, 3, 2, 0, 0};  // sequences longer than 0, 1, 2, 3, 4
  for (int64_t i = 0; i < 5; ++i) {
    CAPTURE(i);
    auto s = exe.run(p, scope, {{"x", x}, {"mem", mem}, {"i", index_tensor(i)}}, {"s"})[0];
    check_close(s, Tensor(mem).slice(0, k[size_t(i)]).clone(), 0, 0, "shrunk");
  }
  CHECK_THROWS_WITH_AS(exe.run(p, scope, {{"x", x}, {"mem", LoDTensor(random_tensor<double>({2, 2}))}, {"i", index_tensor(0)}}, {"s"}),
                       doctest::Contains("shrink_rnn_memory: X ('mem') has 2 rows, but 4 sequences of the rank table 't' are longer than 0"), Error);
}

TEST_CASE("reorder_lod_tensor_by_rank: rows (no LoD) or sequences (one level) in rank order; a count that differs is an oar::Error") {
  Program p;
  Block& b = p.global_block();
  const LoDTensor x = sequences(kLengths, 2, 31);
  const LoDTensor rows = LoDTensor(random_tensor<double>({5, 2}, -1, 1, 32));
  const LoDTensor seqs = sequences({1, 2, 0, 1, 1}, 2, 33);  // other lengths: only the count must agree
  declare_ranked(b, x);
  declare(b, "rows", rows);
  declare(b, "seqs", seqs);
  add(b, "reorder_lod_tensor_by_rank", {{"X", {"rows"}}, {"RankTable", {"t"}}}, {{"Out", {"r1"}}});
  add(b, "reorder_lod_tensor_by_rank", {{"X", {"seqs"}}, {"RankTable", {"t"}}}, {{"Out", {"r2"}}});
  Executor exe;
  Scope scope;
  auto out = exe.run(p, scope, {{"x", x}, {"rows", rows}, {"seqs", seqs}}, {"r1", "r2"});
  const auto table = expected_table(kLengths);
  std::vector<double> want_rows, want_seqs;
  std::vector<size_t> want_lengths;
  const auto& off = seqs.lod()[0];
  for (size_t r = 0; r < 5; ++r) {
    const size_t s = size_t(table[2 * r]);
    for (int64_t j = 0; j < 2; ++j) want_rows.push_back(rows.get(int64_t(s) * 2 + j));
    for (size_t row = off[s]; row < off[s + 1]; ++row)
      for (int64_t j = 0; j < 2; ++j) want_seqs.push_back(seqs.get(int64_t(row) * 2 + j));
    want_lengths.push_back(off[s + 1] - off[s]);
  }
  check_close(out[0], Tensor::from<double>(want_rows, {5, 2}), 0, 0, "rows");
  CHECK(out[0].lod().empty());
  check_close(out[1], Tensor::from<double>(want_seqs, seqs.shape()), 0, 0, "sequences");
  CHECK(out[1].lengths() == Lengths{want_lengths});
  CHECK_THROWS_WITH_AS(exe.run(p, scope, {{"x", x}, {"rows", LoDTensor(random_tensor<double>({4, 2}))}, {"seqs", seqs}}, {"r1"}),
                       doctest::Contains("reorder_lod_tensor_by_rank: X ('rows') has 4 rows, but the rank table lists 5 sequences"), Error);
  CHECK_THROWS_WITH_AS(exe.run(p, scope, {{"x", x}, {"rows", rows}, {"seqs", sequences({1, 2}, 2, 3)}}, {"r2"}),
                       doctest::Contains("reorder_lod_tensor_by_rank: X ('seqs') has 2 sequences, but the rank table lists 5"), Error);
}

// ---- gradients (f64, central differences of loss = mean(y * w))

TEST_CASE("write_to_array / read_from_array grads: an entry read twice sums, an entry nobody reads gives zeros") {
  Program p;
  Block& b = p.global_block();
  const LoDTensor x1 = LoDTensor(random_tensor<double>({3, 2}, -1, 1, 41)), x2 = LoDTensor(random_tensor<double>({3, 2}, -1, 1, 42)),
                  x3 = LoDTensor(random_tensor<double>({3, 2}, -1, 1, 43));
  for (auto& [n, t] : std::vector<std::pair<std::string, LoDTensor>>{{"x1", x1}, {"x2", x2}, {"x3", x3}}) declare(b, n, t);
  for (auto n : {"i0", "i1", "i2"}) b.create_var(n, {.dtype = DType::i64, .shape = Shape{1}});
  add(b, "write_to_array", {{"X", {"x1"}}, {"I", {"i0"}}}, {{"Out", {"A"}}});
  add(b, "write_to_array", {{"X", {"x3"}}, {"I", {"i1"}}}, {{"Out", {"A"}}});  // never read
  add(b, "write_to_array", {{"X", {"x2"}}, {"I", {"i2"}}}, {{"Out", {"A"}}});
  add(b, "read_from_array", {{"X", {"A"}}, {"I", {"i0"}}}, {{"Out", {"r0"}}});
  add(b, "read_from_array", {{"X", {"A"}}, {"I", {"i2"}}}, {{"Out", {"r2"}}});
  add(b, "read_from_array", {{"X", {"A"}}, {"I", {"i0"}}}, {{"Out", {"r0b"}}});
  add(b, "elementwise_mul", {{"X", {"r0"}}, {"Y", {"r0b"}}}, {{"Out", {"sq"}}});  // x1 * x1
  add(b, "elementwise_add", {{"X", {"sq"}}, {"Y", {"r2"}}}, {{"Out", {"y"}}});
  add_weighted_loss(b, "y", "w");
  const FeedMap feeds = {{"x1", x1}, {"x2", x2}, {"x3", x3}, {"i0", index_tensor(0)}, {"i1", index_tensor(1)}, {"i2", index_tensor(2)},
                         {"w", LoDTensor(random_tensor<double>({3, 2}, -1, 1, 44))}};
  check_grad(p, feeds, "x1");
  check_grad(p, feeds, "x2");
  const Tensor g3 = check_grad(p, feeds, "x3");
  for (int64_t i = 0; i < g3.numel(); ++i) CHECK(g3.get(i) == 0.0);
  Program g = p;
  append_backward(g, "loss");
  CHECK(kind_is(g, "A@GRAD", VarKind::lod_tensor_array));  // declared an array, summed from three reads
  int sums = 0;
  for (auto* op : g.global_block().ops()) sums += op->type() == "sum";
  CHECK(sums == 1);
}

TEST_CASE("lod_tensor_to_array grad: array_to_lod_tensor of the entries' gradients, zeros for the steps nobody reads") {
  Program p;
  Block& b = p.global_block();
  const LoDTensor x = sequences(kLengths, 2, 51);
  declare_ranked(b, x);
  b.create_var("i1", {.dtype = DType::i64, .shape = Shape{1}});
  add(b, "lod_tensor_to_array", {{"X", {"x"}}, {"RankTable", {"t"}}}, {{"Out", {"A"}}});
  add(b, "read_from_array", {{"X", {"A"}}, {"I", {"i1"}}}, {{"Out", {"a1"}}});
  add(b, "elementwise_mul", {{"X", {"a1"}}, {"Y", {"a1"}}}, {{"Out", {"y"}}});
  add_weighted_loss(b, "y", "w");
  const FeedMap feeds = {{"x", x}, {"i1", index_tensor(1)}, {"w", LoDTensor(random_tensor<double>({3, 2}, -1, 1, 52))}};
  const Tensor g = check_grad(p, feeds, "x");
  // Rows not at step 1 (each sequence's first and third rows) get nothing.
  for (int64_t row : {0, 2, 4, 5, 6, 8})
    for (int64_t j = 0; j < 2; ++j) CHECK(g.get(row * 2 + j) == 0.0);
}

TEST_CASE("shrink_rnn_memory and reorder_lod_tensor_by_rank grads match finite differences") {
  const LoDTensor x = sequences(kLengths, 2, 61);
  SUBCASE("shrink_rnn_memory at step 1: the dropped rows get zero") {
    Program p;
    Block& b = p.global_block();
    const LoDTensor mem = LoDTensor(random_tensor<double>({5, 2}, -1, 1, 62));
    declare_ranked(b, x);
    declare(b, "mem", mem);
    b.create_var("i", {.dtype = DType::i64, .shape = Shape{1}});
    add(b, "shrink_rnn_memory", {{"X", {"mem"}}, {"I", {"i"}}, {"RankTable", {"t"}}}, {{"Out", {"s"}}});
    add(b, "elementwise_mul", {{"X", {"s"}}, {"Y", {"s"}}}, {{"Out", {"y"}}});
    add_weighted_loss(b, "y", "w");
    const Tensor g = check_grad(p, {{"x", x}, {"mem", mem}, {"i", index_tensor(1)}, {"w", LoDTensor(random_tensor<double>({3, 2}, -1, 1, 63))}}, "mem");
    for (int64_t e = 6; e < 10; ++e) CHECK(g.get(e) == 0.0);
  }
  for (bool with_lod : {false, true}) {
    SUBCASE(with_lod ? "reorder_lod_tensor_by_rank of sequences" : "reorder_lod_tensor_by_rank of rows") {
      Program p;
      Block& b = p.global_block();
      const LoDTensor v = with_lod ? sequences({1, 2, 0, 1, 1}, 2, 64) : LoDTensor(random_tensor<double>({5, 2}, -1, 1, 65));
      declare_ranked(b, x);
      declare(b, "v", v);
      add(b, "reorder_lod_tensor_by_rank", {{"X", {"v"}}, {"RankTable", {"t"}}}, {{"Out", {"r"}}});
      add(b, "elementwise_mul", {{"X", {"r"}}, {"Y", {"r"}}}, {{"Out", {"y"}}});
      add_weighted_loss(b, "y", "w");
      check_grad(p, {{"x", x}, {"v", v}, {"w", LoDTensor(random_tensor<double>({5, 2}, -1, 1, 66))}}, "v");
    }
  }
}

// ---- layers, end to end

TEST_CASE("layers end to end: lod_tensor_to_array, two reads, float ops, writes into another array, array_to_lod_tensor, mean") {
  Tape tape;
  Var x = data("x", f64, {-1, 3}).lod_level(1);
  x.stop_gradient(false);
  Var w = data("w", f64, {-1, 3});
  Var table = lod_rank_table(x);
  Var steps = lod_tensor_to_array(x, table);
  Var i0 = fill_constant({1}, i64, 0);
  Var i1 = increment(i0);
  Var h0 = oar::tanh(array_read(steps, i0));
  Var a1 = array_read(steps, i1);
  Var h1 = elementwise_mul(a1, a1);
  Var out = create_array(f64);
  Var written = array_write(h0, i0, out);
  written = array_write(h1, i1, written);
  Var len = array_length(written);
  Var y = array_to_lod_tensor(written, table);
  Var loss = mean(elementwise_mul(y, w));
  Var longest = max_sequence_len(table);
  Topology topo = tape.program({loss, y, len, longest, i0, i1});
  const std::string& arr = topo.name_of(out);
  CHECK(topo.name_of(written) == arr);  // array_write returns the array it wrote, in place
  CHECK(kind_is(topo.main, arr, VarKind::lod_tensor_array));
  CHECK(topo.name_of(i1) != topo.name_of(i0));  // increment makes a new variable
  CHECK(y.lod_level() == 1);
  CHECK(y.dtype() == f64);

  const std::vector<size_t> lengths = {2, 0, 1, 2};  // ties at 2, an empty and a length-1 sequence
  const LoDTensor xv = sequences(lengths, 3, 71);
  const Tensor wv = random_tensor<double>({5, 3}, -1, 1, 72);
  Program fwd = topo.main;
  const std::string loss_name = topo.name_of(loss);
  Program g = fwd;
  append_backward(g, loss_name);
  Executor exe;
  Scope scope;
  const FeedMap feeds = {{"x", xv}, {"w", wv}};
  const std::vector<std::string> fetch = {topo.name_of(y), loss_name, grad_var_name("x"), topo.name_of(len), topo.name_of(longest), topo.name_of(i0),
                                          topo.name_of(i1)};
  auto first = exe.run(g, scope, feeds, fetch);
  for (auto& t : first) t = LoDTensor(t.clone(), t.lod());  // fetches share the scope's storage, which the next runs reuse
  // y: step 0 of every sequence through tanh, step 1 squared; sequences in their own order with their LoD.
  std::vector<double> want;
  const auto& off = xv.lod()[0];
  for (size_t s = 0; s < lengths.size(); ++s)
    for (size_t t = 0; t < lengths[s]; ++t)
      for (int64_t j = 0; j < 3; ++j) {
        const double v = xv.get(int64_t(off[s] + t) * 3 + j);
        want.push_back(t == 0 ? std::tanh(v) : v * v);
      }
  check_close(first[0], Tensor::from<double>(want, {5, 3}), 1e-12, 1e-12, "y");
  CHECK(first[0].lod() == xv.lod());
  CHECK(first[3].data<int64_t>()[0] == 2);
  CHECK(first[4].data<int64_t>()[0] == 2);
  CHECK(first[5].data<int64_t>()[0] == 0);  // x of increment unchanged
  CHECK(first[6].data<int64_t>()[0] == 1);
  CHECK(kind_is(g, grad_var_name(arr), VarKind::lod_tensor_array));

  // The gradient of x against central differences of the forward program.
  Scope fs;
  const double delta = 1e-6;
  for (int64_t e = 0; e < xv.numel(); ++e) {
    auto at = [&](double v) {
      LoDTensor moved(xv.clone(), xv.lod());
      moved.data<double>()[e] = v;
      return exe.run(fwd, fs, {{"x", moved}, {"w", wv}}, {loss_name})[0].get(0);
    };
    const double num = (at(xv.get(e) + delta) - at(xv.get(e) - delta)) / (2 * delta);
    CAPTURE(e);
    CHECK(first[2].get(e) == doctest::Approx(num).epsilon(1e-6));
  }

  // A second run gives the same values (the arrays start empty again).
  auto second = exe.run(g, scope, feeds, fetch);
  for (size_t k = 0; k < fetch.size(); ++k) check_close(second[k], first[k], 0, 0, fetch[k]);
}

TEST_CASE("executor: a program's tensor arrays are emptied at the start of every run") {
  Tape tape;
  Var x = data("x", f32, {2});
  Var i = data("i", i64, {1});
  Var arr = array_write(x, i, create_array(f32));
  Var len = array_length(arr);
  Topology topo = tape.program(len);
  Executor exe;
  Scope scope;
  auto p = exe.prepare(topo.main, scope);
  const Tensor xv = Tensor::from<float>({1, 2});
  CHECK(exe.run(*p, scope, {{"x", xv}, {"i", index_tensor(3)}}, {topo.name_of(len)})[0].data<int64_t>()[0] == 4);
  CHECK(exe.run(*p, scope, {{"x", xv}, {"i", index_tensor(1)}}, {topo.name_of(len)})[0].data<int64_t>()[0] == 2);  // not 4: last run's entries are gone
  CHECK(p->local_scope()->find(topo.name_of(arr))->list()[1].data<float>()[1] == 2.0f);
}

TEST_CASE("layers: compares and logical ops give bool Vars; array_write into a plain variable is an oar::Error") {
  Tape tape;
  Var a = data("a", i64, {1});
  Var n = data("n", i64, {1});
  Var lt = less_than(a, n), ge = greater_equal(a, n);
  Var both = logical_and(lt, logical_not(ge));
  Var either = logical_or(equal(a, n), not_equal(a, n));
  Var x = logical_xor(less_equal(a, n), greater_than(a, n));
  CHECK(lt.dtype() == DType::boolean);
  Topology topo = tape.program({both, either, x});
  Executor exe;
  Scope scope;
  for (int64_t av : {1, 3, 5}) {
    auto out = exe.run(topo.main, scope, {{"a", index_tensor(av)}, {"n", index_tensor(3)}}, {topo.name_of(both), topo.name_of(either), topo.name_of(x)});
    CHECK(out[0].data<bool>()[0] == (av < 3));
    CHECK(out[1].data<bool>()[0]);
    CHECK(out[2].data<bool>()[0]);
  }
  Var bad = array_write(a, n, n);
  CHECK_THROWS_WITH_AS(tape.program(bad), doctest::Contains("array_write: 'n' is not a tensor array (make one with oar::create_array)"), Error);
}
