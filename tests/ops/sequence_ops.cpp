// tests/ops/sequence_ops.cpp: sequence_softmax, sequence_expand, sequence_concat, lod_reset and sequence_mask
// through the op harness (plain-loop references, empty and length-1 sequences, multi-level LoD, f64
// gradients, bad or missing LoD), and a small model built from their layers that trains and, once its
// shapes repeat, allocates nothing on the heap.
#include "pch.hpp"
#include "support/heap.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {

/// Plain-loop softmax of a column inside each sequence of `seq`, in double.
Tensor naive_sequence_softmax(const Tensor& x, const std::vector<size_t>& seq) {
  std::vector<double> out(size_t(x.numel()));
  for (size_t s = 0; s + 1 < seq.size(); ++s) {
    double m = -INFINITY, sum = 0;
    for (size_t r = seq[s]; r < seq[s + 1]; ++r) m = std::max(m, x.get(int64_t(r)));
    for (size_t r = seq[s]; r < seq[s + 1]; ++r) sum += std::exp(x.get(int64_t(r)) - m);
    for (size_t r = seq[s]; r < seq[s + 1]; ++r) out[r] = std::exp(x.get(int64_t(r)) - m) / sum;
  }
  return Tensor::from<double>(out, x.shape());
}

/// Plain-loop sequence_expand: unit i of x (rows xu[i]..xu[i+1], or row i when xu is empty) r[i+1] - r[i] times.
Tensor naive_expand(const Tensor& x, const std::vector<size_t>& xu, const std::vector<size_t>& r) {
  const int64_t D = x.numel() / x.dim(0);
  std::vector<double> out;
  for (size_t i = 0; i + 1 < r.size(); ++i) {
    size_t b = xu.empty() ? i : xu[i], e = xu.empty() ? i + 1 : xu[i + 1];
    for (size_t k = r[i]; k < r[i + 1]; ++k)
      for (size_t row = b; row < e; ++row)
        for (int64_t d = 0; d < D; ++d) out.push_back(x.get(int64_t(row) * D + d));
  }
  Shape os = x.shape();
  os[0] = int64_t(out.size()) / D;
  return Tensor::from<double>(out, os);
}

}  // namespace

// ---- sequence_softmax

TEST_CASE_TEMPLATE("sequence_softmax: forward matches a plain loop per sequence, with empty and length-1 sequences", T, float, double) {
  const LoD lod{{0, 4, 4, 5, 9, 9, 10}};
  auto x = random_tensor<T>({10, 1}, -4, 4, 3);
  auto outs = OpTest("sequence_softmax").input("X", LoDTensor(x, lod)).unknown_batch().run();
  check_close(to_f64(outs["Out"]), naive_sequence_softmax(to_f64(x), lod[0]), 1e-6, 1e-5, "sequence_softmax");
  CHECK(outs["Out"].lod() == lod);
  CHECK(outs["Out"].get(4) == doctest::Approx(1.0));  // a length-1 sequence is certain
  CHECK(outs["Out"].get(9) == doctest::Approx(1.0));

  auto flat = Tensor::from<double>({1000, 1001, -3}, {3});  // rank 1; huge scores stay finite
  auto f = OpTest("sequence_softmax").input("X", LoDTensor(flat, {{0, 2, 3}})).run()["Out"];
  CHECK(f.shape() == Shape{3});
  check_close(f, naive_sequence_softmax(flat, {0, 2, 3}), 1e-12, 1e-9, "rank 1");
}

TEST_CASE("sequence_softmax: a 2-level LoD normalizes over the last level and keeps both") {
  const LoD lod{{0, 1, 3}, {0, 2, 5, 6}};
  auto x = random_tensor<double>({6, 1}, -2, 2, 8);
  auto out = OpTest("sequence_softmax").input("X", LoDTensor(x, lod)).run()["Out"];
  check_close(out, naive_sequence_softmax(x, lod[1]), 1e-12, 1e-9, "2-level");
  CHECK(out.lod() == lod);
}

TEST_CASE("sequence_softmax: grad matches finite differences (f64)") {
  OpTest("sequence_softmax").input("X", LoDTensor(random_tensor<double>({9, 1}, -2, 2, 4), {{0, 3, 3, 4, 9}})).check_grad({"X"}, {"Out"});
  OpTest("sequence_softmax").input("X", LoDTensor(random_tensor<double>({5}, -2, 2, 5), {{0, 2}, {0, 1, 5}})).check_grad({"X"}, {"Out"});
}

TEST_CASE("sequence_softmax: a wide X, a missing or a bad LoD is an oar::Error naming the op") {
  auto wide = error_of([] { OpTest("sequence_softmax").input("X", LoDTensor(random_tensor<float>({4, 2}), {{0, 4}})).build(); });
  CHECK(contains(wide, "sequence_softmax: X must be [N, 1] or [N], got [4, 2]"));
  auto none = error_of([] { OpTest("sequence_softmax").input("X", LoDTensor(random_tensor<float>({4, 1}))).run(); });
  CHECK(contains(none, "sequence_softmax: X ('X_0') [4, 1] has no LoD"));
  LoDTensor bad(random_tensor<float>({4, 1}), {{0, 2, 4}});
  bad.resize(Shape{5, 1});
  auto rows = error_of([&] { OpTest("sequence_softmax").input("X", bad).run(); });
  CHECK(contains(rows, "sequence_softmax: X ('X_0') [5, 1] has a bad LoD: level 0 ends at 4 but 5 rows follow"));
}

// ---- sequence_expand

TEST_CASE("sequence_expand: Fluid's examples: sequences of x by a 2-level y at ref_level 0, rows of x by y") {
  // x = [a; b | c; d], y.lod = [[0, 2, 4], [0, 3, 6, 7, 8]], ref_level 0: each x sequence twice.
  auto x = Tensor::from<double>({1, 2, 3, 4}, {4, 1});
  auto y = LoDTensor(random_tensor<double>({8, 1}), {{0, 2, 4}, {0, 3, 6, 7, 8}});
  auto out = OpTest("sequence_expand").input("X", LoDTensor(x, {{0, 2, 4}})).input("Y", y).attr("ref_level", 0).run()["Out"];
  CHECK(out.to_vector<double>() == std::vector<double>{1, 2, 1, 2, 3, 4, 3, 4});
  CHECK(out.lod() == LoD{{0, 2, 4, 6, 8}});

  // x = [a; b; c] (no LoD), y.lod = [[0, 2, 2, 5]]: a twice, b never, c three times.
  auto rows = Tensor::from<double>({1, 2, 3}, {3, 1});
  auto out2 = OpTest("sequence_expand").input("X", LoDTensor(rows)).input("Y", LoDTensor(random_tensor<double>({5, 1}), {{0, 2, 2, 5}})).run()["Out"];
  CHECK(out2.to_vector<double>() == std::vector<double>{1, 1, 3, 3, 3});
  CHECK(out2.lod() == LoD{{0, 2, 2, 5}});
}

TEST_CASE_TEMPLATE("sequence_expand: forward matches a plain loop, empty sequences on both sides, every ref_level", T, float, double, int64_t) {
  auto x = random_tensor<T>({7, 2, 3}, -5, 5, 6);
  const std::vector<size_t> xu{0, 2, 2, 3, 7};  // 4 sequences, one empty and one of length 1
  // y: 4 top sequences of 3, 0, 1, 2 sub-sequences; 6 sub-sequences over 9 rows.
  const LoD ylod{{0, 3, 3, 4, 6}, {0, 1, 1, 4, 5, 7, 9}};
  auto y = LoDTensor(random_tensor<float>({9, 1}), ylod);
  auto out = OpTest("sequence_expand").input("X", LoDTensor(x, {xu})).input("Y", y).attr("ref_level", 0).unknown_batch().run()["Out"];
  check_close(to_f64(out), naive_expand(to_f64(x), xu, ylod[0]), 0, 0, "ref_level 0");
  CHECK(out.lod() == LoD{{0, 2, 4, 6, 7, 11, 15}});  // one sequence per copy: 3 x len 2, 1 x len 1, 2 x len 4
  CHECK(out.dtype() == x.dtype());

  // x without LoD: 6 rows for the 6 sequences of y's last level (the default ref_level -1).
  auto rows = random_tensor<T>({6, 4}, -5, 5, 7);
  auto o2 = OpTest("sequence_expand").input("X", LoDTensor(rows)).input("Y", y).unknown_batch().run()["Out"];
  check_close(to_f64(o2), naive_expand(to_f64(rows), {}, ylod[1]), 0, 0, "ref_level -1");
  CHECK(o2.lod() == LoD{ylod[1]});
}

TEST_CASE("sequence_expand: build time gives Out one LoD level and unknown rows") {
  Program p = OpTest("sequence_expand").input("X", LoDTensor(random_tensor<float>({3, 5}))).input("Y", LoDTensor(random_tensor<float>({4, 1}), {{0, 1, 1, 4}})).build();
  CHECK(p.global_block().var("Out_0").shape() == Shape{-1, 5});
  CHECK(p.global_block().var("Out_0").lod_level() == 1);
}

TEST_CASE("sequence_expand: grad sums the copies back (f64); uncopied units get zeros") {
  const LoD ylod{{0, 3, 3, 4, 6}, {0, 1, 1, 4, 5, 7, 9}};
  auto y = LoDTensor(random_tensor<double>({9, 1}), ylod);
  OpTest("sequence_expand").input("X", LoDTensor(random_tensor<double>({7, 2}, -1, 1, 3), {{0, 2, 2, 3, 7}})).input("Y", y).attr("ref_level", 0)
      .check_grad({"X"}, {"Out"});
  OpTest("sequence_expand").input("X", LoDTensor(random_tensor<double>({6, 3}, -1, 1, 4))).input("Y", y).check_grad({"X"}, {"Out"});
  OpTest("sequence_expand").input("X", LoDTensor(random_tensor<double>({4, 3}, -1, 1, 4))).input("Y", y).attr("ref_level", 0).check_grad({"X"}, {"Out"});
}

TEST_CASE("sequence_expand: Y without LoD, mismatched counts, deep X or a bad ref_level is an oar::Error naming the op") {
  auto x = LoDTensor(random_tensor<float>({3, 2}));
  auto no_lod = error_of([&] { OpTest("sequence_expand").input("X", x).input("Y", LoDTensor(random_tensor<float>({3, 1}))).run(); });
  CHECK(contains(no_lod, "sequence_expand: Y ('Y_0') [3, 1] has no LoD"));
  auto count = error_of([&] { OpTest("sequence_expand").input("X", x).input("Y", LoDTensor(random_tensor<float>({3, 1}), {{0, 1, 3}})).run(); });
  CHECK(contains(count, "sequence_expand: X ('X_0') has 3 rows (X has no LoD) but Y's LoD level 0 has 2 sequences"));
  auto seqs = error_of([&] {
    OpTest("sequence_expand").input("X", LoDTensor(random_tensor<float>({3, 2}), {{0, 1, 3}})).input("Y", LoDTensor(random_tensor<float>({3, 1}), {{0, 1, 2, 3}})).run();
  });
  CHECK(contains(seqs, "has 2 sequences but Y's LoD level 0 has 3 sequences"));
  auto deep = error_of([&] {
    OpTest("sequence_expand").input("X", LoDTensor(random_tensor<float>({3, 2}), {{0, 1}, {0, 3}})).input("Y", LoDTensor(random_tensor<float>({3, 1}), {{0, 3}})).build();
  });
  CHECK(contains(deep, "sequence_expand: X has 2 LoD levels; sequence_expand takes X with at most 1"));
  auto level = error_of([&] { OpTest("sequence_expand").input("X", x).input("Y", LoDTensor(random_tensor<float>({3, 1}), {{0, 3}})).attr("ref_level", 1).build(); });
  CHECK(contains(level, "ref_level = 1 but Y has only 1 LoD levels"));
}

// ---- sequence_concat

TEST_CASE_TEMPLATE("sequence_concat: sequence i of each input joins sequence i of Out, with empty sequences", T, float, double, int64_t) {
  auto a = random_tensor<T>({5, 3}, -9, 9, 1), b = random_tensor<T>({4, 3}, -9, 9, 2), c = random_tensor<T>({1, 3}, -9, 9, 3);
  const std::vector<size_t> la{0, 2, 2, 5}, lb{0, 1, 1, 4}, lc{0, 0, 0, 1};
  auto out = OpTest("sequence_concat").inputs("X", {LoDTensor(a, {la}), LoDTensor(b, {lb}), LoDTensor(c, {lc})}).unknown_batch().run()["Out"];
  CHECK(out.lod() == LoD{{0, 3, 3, 10}});
  std::vector<double> want;
  auto take = [&](const Tensor& t, size_t r0, size_t r1) {
    for (size_t r = r0; r < r1; ++r)
      for (int64_t d = 0; d < 3; ++d) want.push_back(t.get(int64_t(r) * 3 + d));
  };
  for (size_t s = 0; s < 3; ++s) take(a, la[s], la[s + 1]), take(b, lb[s], lb[s + 1]), take(c, lc[s], lc[s + 1]);
  check_close(to_f64(out), Tensor::from<double>(want, {10, 3}), 0, 0, "sequence_concat");
  CHECK(out.dtype() == a.dtype());
}

TEST_CASE("sequence_concat: grad cuts Out@GRAD back into the inputs (f64)") {
  OpTest("sequence_concat")
      .inputs("X", {LoDTensor(random_tensor<double>({5, 2}, -1, 1, 1), {{0, 2, 2, 5}}), LoDTensor(random_tensor<double>({3, 2}, -1, 1, 2), {{0, 1, 1, 3}})})
      .check_grad({"X"}, {"Out"});
}

TEST_CASE("sequence_concat: different sequence counts, missing LoD or mismatched rows are an oar::Error naming the op") {
  auto counts = error_of([] {
    OpTest("sequence_concat").inputs("X", {LoDTensor(random_tensor<float>({3, 2}), {{0, 1, 3}}), LoDTensor(random_tensor<float>({3, 2}), {{0, 3}})}).run();
  });
  CHECK(contains(counts, "sequence_concat: X[1] ('X_1') has 1 sequences but X[0] has 2"));
  auto flat = error_of([] { OpTest("sequence_concat").inputs("X", {LoDTensor(random_tensor<float>({3, 2}), {{0, 3}}), LoDTensor(random_tensor<float>({3, 2}))}).build(); });
  CHECK(contains(flat, "sequence_concat: X[1] has 0 LoD levels; sequence_concat joins inputs of exactly 1"));
  auto wide = error_of([] {
    OpTest("sequence_concat").inputs("X", {LoDTensor(random_tensor<float>({3, 2}), {{0, 3}}), LoDTensor(random_tensor<float>({3, 4}), {{0, 3}})}).build();
  });
  CHECK(contains(wide, "X[1] [3, 4] differs from X[0] [3, 2] after the first dim"));
}

// ---- lod_reset

TEST_CASE("lod_reset: the LoD comes from target_lod, from Y's LoD or from Y's values; the data is copied") {
  auto x = random_tensor<float>({6, 2}, -1, 1, 3);
  auto o1 = OpTest("lod_reset").input("X", LoDTensor(x, {{0, 3, 6}})).attr("target_lod", std::vector<int32_t>{0, 2, 2, 6}).run()["Out"];
  CHECK(o1.lod() == LoD{{0, 2, 2, 6}});  // an empty sequence is allowed
  check_close(o1, x, 0, 0, "lod_reset data");

  const LoD ylod{{0, 1, 3}, {0, 2, 2, 6}};
  auto o2 = OpTest("lod_reset").input("X", LoDTensor(x)).input("Y", LoDTensor(random_tensor<float>({6, 1}), ylod)).run()["Out"];
  CHECK(o2.lod() == ylod);
  Program p = OpTest("lod_reset").input("X", LoDTensor(x)).input("Y", LoDTensor(random_tensor<float>({6, 1}), ylod)).build();
  CHECK(p.global_block().var("Out_0").lod_level() == 2);

  auto o3 = OpTest("lod_reset").input("X", LoDTensor(x)).input("Y", LoDTensor(Tensor::from<int32_t>({0, 1, 6}, {3}))).run()["Out"];
  CHECK(o3.lod() == LoD{{0, 1, 6}});
  auto o4 = OpTest("lod_reset").input("X", LoDTensor(x)).input("Y", LoDTensor(Tensor::from<int64_t>({0, 5, 5, 6}, {4, 1}))).run()["Out"];
  CHECK(o4.lod() == LoD{{0, 5, 5, 6}});
  check_close(o4, x, 0, 0, "lod_reset data from Y's values");
}

TEST_CASE("lod_reset: grad passes Out@GRAD through with X's LoD (f64)") {
  OpTest("lod_reset").input("X", LoDTensor(random_tensor<double>({5, 2}, -1, 1, 2), {{0, 4, 5}})).attr("target_lod", std::vector<int32_t>{0, 1, 5})
      .check_grad({"X"}, {"Out"});
  OpTest("lod_reset").input("X", LoDTensor(random_tensor<double>({5, 2}, -1, 1, 2))).input("Y", LoDTensor(random_tensor<double>({5, 1}), {{0, 3, 5}}))
      .check_grad({"X"}, {"Out"});
}

TEST_CASE("lod_reset: a LoD that does not fit X, no LoD source, or float offsets is an oar::Error naming the op") {
  auto x = LoDTensor(random_tensor<float>({6, 2}));
  auto end = error_of([&] { OpTest("lod_reset").input("X", x).attr("target_lod", std::vector<int32_t>{0, 2, 5}).run(); });
  CHECK(contains(end, "lod_reset: the LoD from target_lod does not fit X ('X_0') [6, 2]: level 0 ends at 5 but 6 rows follow"));
  auto down = error_of([&] { OpTest("lod_reset").input("X", x).input("Y", LoDTensor(Tensor::from<int64_t>({0, 4, 2, 6}, {4}))).run(); });
  CHECK(contains(down, "lod_reset: the LoD from Y's values does not fit X ('X_0') [6, 2]: level 0 decreases at position 2"));
  auto ylod = error_of([&] { OpTest("lod_reset").input("X", x).input("Y", LoDTensor(random_tensor<float>({4, 1}), {{0, 4}})).run(); });
  CHECK(contains(ylod, "the LoD from Y's LoD does not fit X ('X_0') [6, 2]: level 0 ends at 4 but 6 rows follow"));
  auto neither = error_of([&] { OpTest("lod_reset").input("X", x).build(); });
  CHECK(contains(neither, "lod_reset: needs Y or a target_lod"));
  auto floats = error_of([&] { OpTest("lod_reset").input("X", x).input("Y", LoDTensor(random_tensor<float>({3}))).build(); });
  CHECK(contains(floats, "Y without LoD gives offsets and must be i32 or i64, got f32"));
}

// ---- sequence_mask

TEST_CASE("sequence_mask: y[i, j] = j < len[i], maxlen from the data or the attribute, any out_dtype") {
  auto len = LoDTensor(Tensor::from<int64_t>({2, 0, 3, 1}, {4}));
  auto y = OpTest("sequence_mask").input("X", len).run()["Y"];
  CHECK(y.shape() == Shape{4, 3});
  CHECK(y.dtype() == i64);
  CHECK(y.to_vector<int64_t>() == std::vector<int64_t>{1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0});

  auto cut = OpTest("sequence_mask").input("X", len).attr("maxlen", 2).attr("out_dtype", int32_t(DType::f32)).run()["Y"];
  CHECK(cut.shape() == Shape{4, 2});
  CHECK(cut.to_vector<float>() == std::vector<float>{1, 1, 0, 0, 1, 1, 1, 0});

  // [N, 1] lengths (i32) give [N, 1, maxlen], Fluid's rule of one dim appended; bool masks.
  auto col = OpTest("sequence_mask").input("X", LoDTensor(Tensor::from<int32_t>({1, 3}, {2, 1}))).attr("maxlen", 4).attr("out_dtype", int32_t(DType::boolean)).run()["Y"];
  CHECK(col.shape() == Shape{2, 1, 4});
  CHECK(col.to_vector<bool>() == std::vector<bool>{true, false, false, false, true, true, true, false});

  auto empty = OpTest("sequence_mask").input("X", LoDTensor(Tensor(Shape{0}, i64))).run()["Y"];
  CHECK(empty.shape() == Shape{0, 0});

  Program p = OpTest("sequence_mask").input("X", len).attr("maxlen", 5).build();
  CHECK(p.global_block().var("Y_0").shape() == Shape{4, 5});
  CHECK(!op_def("sequence_mask").grad);
}

TEST_CASE("sequence_mask: negative lengths, float lengths or a bad out_dtype are an oar::Error naming the op") {
  auto neg = error_of([] { OpTest("sequence_mask").input("X", LoDTensor(Tensor::from<int64_t>({2, -1}, {2}))).run(); });
  CHECK(contains(neg, "sequence_mask: X ('X_0') holds a negative length -1 at 1"));
  auto fl = error_of([] { OpTest("sequence_mask").input("X", LoDTensor(random_tensor<float>({3}))).build(); });
  CHECK(contains(fl, "sequence_mask: X holds lengths and must be i64 or i32, got f32"));
  auto dt = error_of([] { OpTest("sequence_mask").input("X", LoDTensor(Tensor::from<int64_t>({2}, {1}))).attr("out_dtype", 7).build(); });
  CHECK(contains(dt, "out_dtype"));
}

// ---- the layers together

namespace {

/// words [N, 4] (LoD 1) -> a model that uses every sequence layer; cost = a scalar.
struct SeqNet {
  Var words, lengths, mask, cost;
  SeqNet() {
    words = data("words", f32, {-1, 4}).lod_level(1);
    lengths = data("lengths", i64, {-1});
    Var h = fc(words, 3).act(oar::tanh);                                   // [N, 3], the words' LoD
    Var weights = sequence_softmax(fc(h, 1));                          // [N, 1]
    Var sentence = sequence_pool(h, SequencePoolType::max);             // [S, 3]
    Var back = sequence_expand(sentence, words);                        // [N, 3]: each sentence once per word
    Var both = sequence_concat({h, back});                             // [2N, 3]
    Var pooled = sequence_pool(both, SequencePoolType::sqrt);           // [S, 3]
    Var regrouped = lod_reset(fc(words, 2), words);                     // [N, 2], the words' LoD again
    Var firsts = sequence_first_step(regrouped);                        // [S, 2]
    Var lasts = sequence_last_step(weights);                            // [S, 1]
    cost = sums({mean(fc(pooled, 1)), mean(firsts), mean(lasts)});
    mask = sequence_mask(lengths).maxlen(5).dtype(f32);
  }
};

}  // namespace

TEST_CASE("sequence layers: a model of all of them trains, and a step allocates nothing once shapes repeat") {
  Tape tape;
  SeqNet n;
  Topology topo = tape.program({n.cost, n.mask});
  const Block& g = topo.main.global_block();
  CHECK(g.var(topo.outputs[1]).dtype() == f32);
  CHECK(g.var(topo.outputs[1]).shape() == Shape{-1, 5});
  Model model(std::move(topo));
  Optimizer opt(model, n.cost, optim::sgd(0.5));
  auto w = random_tensor<float>({7, 4}, -1, 1, 12);
  FeedMap feeds{{"words", LoDTensor(w, {{0, 3, 3, 4, 7}})}, {"lengths", LoDTensor(Tensor::from<int64_t>({3, 0, 1, 3}, {4}))}};
  std::vector<LoDTensor> out;
  opt.step(feeds, out);
  const double first = out[0].get(0);
  for (int i = 0; i < 3; ++i) opt.step(feeds, out);  // the first runs size every buffer
  const int64_t before = oar_test::heap_allocations.load();
  for (int i = 0; i < 5; ++i) opt.step(feeds, out);
  CHECK(oar_test::heap_allocations.load() - before == 0);
  CHECK(out[0].get(0) < first);
}
