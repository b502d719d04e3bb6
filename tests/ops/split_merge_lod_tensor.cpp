// tests/ops/split_merge_lod_tensor.cpp: split_lod_tensor and merge_lod_tensor through the op harness: plain-loop
// references by rows and by sequences (empty and length-1 ones, two LoD levels), all-true and all-false masks,
// a merge that must not read a stale side, f64 gradients, and the errors for bad masks and widths.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {

LoDTensor mask_of(const std::vector<int>& m, bool column = true) {
  Tensor t(column ? Shape{int64_t(m.size()), 1} : Shape{int64_t(m.size())}, boolean);
  for (size_t i = 0; i < m.size(); ++i) t.data<bool>()[i] = m[i] != 0;
  return LoDTensor(t);
}

/// The rows [b, e) of item i: row i without offsets, else sequence i of `offsets` (level 0 over rows).
std::pair<size_t, size_t> item_rows(const std::vector<size_t>& offsets, size_t i) {
  return offsets.empty() ? std::pair{i, i + 1} : std::pair{offsets[i], offsets[i + 1]};
}

/// Plain-loop split: the rows of the items whose mask entry is `side`, as f64, and their lengths.
Tensor naive_part(const Tensor& x, const std::vector<size_t>& offsets, const std::vector<int>& m, bool side, std::vector<size_t>* lengths = nullptr) {
  const int64_t D = x.numel() / x.dim(0);
  std::vector<double> out;
  for (size_t i = 0; i < m.size(); ++i) {
    if ((m[i] != 0) != side) continue;
    auto [b, e] = item_rows(offsets, i);
    if (lengths) lengths->push_back(e - b);
    for (size_t r = b; r < e; ++r)
      for (int64_t d = 0; d < D; ++d) out.push_back(x.get(int64_t(r) * D + d));
  }
  Shape s = x.shape();
  s[0] = int64_t(out.size()) / D;
  return Tensor::from<double>(out, s);
}

/// Plain-loop merge: item i from the next item of `t` when m[i], else of `f`.
Tensor naive_merge(const Tensor& t, const Tensor& f, int64_t rows, const std::vector<size_t>& offsets, const std::vector<int>& m) {
  const Tensor& like = t.numel() ? t : f;
  const int64_t D = like.numel() / like.dim(0);
  std::vector<double> out;
  int64_t at[2] = {0, 0};
  for (size_t i = 0; i < m.size(); ++i) {
    const Tensor& src = m[i] ? t : f;
    int64_t& r0 = at[m[i] ? 0 : 1];
    auto [b, e] = item_rows(offsets, i);
    for (size_t r = b; r < e; ++r, ++r0)
      for (int64_t d = 0; d < D; ++d) out.push_back(src.get(r0 * D + d));
  }
  Shape s = like.shape();
  s[0] = rows;
  return Tensor::from<double>(out, s);
}

LoD offsets_of(const std::vector<size_t>& lengths) {
  LoD lod{{0}};
  for (size_t n : lengths) lod[0].push_back(lod[0].back() + n);
  return lod;
}

}  // namespace

// ---- split_lod_tensor

TEST_CASE_TEMPLATE("split_lod_tensor: rows go to OutTrue / OutFalse by the mask, in order; merge_lod_tensor puts them back", T, float, double, int32_t,
                   int64_t) {
  auto x = random_tensor<T>({6, 3}, -9, 9, 5);
  for (const std::vector<int>& m : {std::vector<int>{1, 0, 0, 1, 1, 0}, std::vector<int>{1, 1, 1, 1, 1, 1}, std::vector<int>{0, 0, 0, 0, 0, 0}}) {
    CAPTURE(m[0] + 2 * m[1] + 4 * m[2]);
    auto outs = OpTest("split_lod_tensor").input("X", LoDTensor(x)).input("Mask", mask_of(m)).unknown_batch().run();
    check_close(to_f64(outs["OutTrue"]), naive_part(x, {}, m, true), 0, 0, "OutTrue");
    check_close(to_f64(outs["OutFalse"]), naive_part(x, {}, m, false), 0, 0, "OutFalse");
    CHECK(outs["OutTrue"].dtype() == dtype_of<T>);
    CHECK(outs["OutTrue"].lod().empty());

    auto back = OpTest("merge_lod_tensor").input("InTrue", outs["OutTrue"]).input("InFalse", outs["OutFalse"]).input("X", LoDTensor(x)).input("Mask", mask_of(m))
                    .unknown_batch().run()["Out"];
    check_close(back, x, 0, 0, "merge of the split");
  }
  // A mask of shape [N] works as [N, 1] does.
  auto flat = OpTest("split_lod_tensor").input("X", LoDTensor(x)).input("Mask", mask_of({0, 1, 0, 0, 0, 1}, false)).run();
  check_close(to_f64(flat["OutTrue"]), naive_part(x, {}, {0, 1, 0, 0, 0, 1}, true), 0, 0, "[N] mask");
}

TEST_CASE("split_lod_tensor: whole sequences of level 0 keep their LoD, with empty and length-1 sequences") {
  const std::vector<size_t> lengths{2, 0, 1, 3, 0, 1};
  const LoD lod = offsets_of(lengths);
  auto x = random_tensor<double>({7, 2}, -1, 1, 8);
  const std::vector<int> m{1, 1, 0, 1, 0, 0};
  auto outs = OpTest("split_lod_tensor").input("X", LoDTensor(x, lod)).input("Mask", mask_of(m)).unknown_batch().run();
  std::vector<size_t> lt, lf;
  check_close(outs["OutTrue"], naive_part(x, lod[0], m, true, &lt), 0, 0, "OutTrue");
  check_close(outs["OutFalse"], naive_part(x, lod[0], m, false, &lf), 0, 0, "OutFalse");
  CHECK(outs["OutTrue"].lod() == offsets_of(lt));  // {2, 0, 3}
  CHECK(outs["OutFalse"].lod() == offsets_of(lf));  // {1, 0, 1}
  CHECK(outs["OutTrue"].lod() == LoD{{0, 2, 2, 5}});
  CHECK(outs["OutFalse"].lod() == LoD{{0, 1, 1, 2}});

  // A mask that is true only for empty sequences gives OutTrue no rows but those sequences.
  auto empty = OpTest("split_lod_tensor").input("X", LoDTensor(x, lod)).input("Mask", mask_of({0, 1, 0, 0, 1, 0})).run();
  CHECK(empty["OutTrue"].shape() == Shape{0, 2});
  CHECK(empty["OutTrue"].lod() == LoD{{0, 0, 0}});

  auto back = OpTest("merge_lod_tensor").input("InTrue", outs["OutTrue"]).input("InFalse", outs["OutFalse"]).input("X", LoDTensor(x, lod)).input("Mask", mask_of(m))
                  .run()["Out"];
  check_close(back, x, 0, 0, "merge of the split");
  CHECK(back.lod() == lod);
}

TEST_CASE("split_lod_tensor: two LoD levels, split at level 0 or at level 1") {
  // 3 paragraphs of {2, 0, 1} sentences; the 3 sentences have {1, 3, 2} words.
  const LoD lod{{0, 2, 2, 3}, {0, 1, 4, 6}};
  auto x = make_tensor<double>({6, 1}, [](int64_t i) { return double(i); });
  auto top = OpTest("split_lod_tensor").input("X", LoDTensor(x, lod)).input("Mask", mask_of({0, 1, 1})).run();
  CHECK(top["OutTrue"].to_vector<double>() == std::vector<double>{4, 5});
  CHECK(top["OutTrue"].lod() == LoD{{0, 0, 1}, {0, 2}});
  CHECK(top["OutFalse"].to_vector<double>() == std::vector<double>{0, 1, 2, 3});
  CHECK(top["OutFalse"].lod() == LoD{{0, 2}, {0, 1, 4}});

  auto sentences = OpTest("split_lod_tensor").input("X", LoDTensor(x, lod)).input("Mask", mask_of({1, 0, 1})).attr("level", 1).run();
  CHECK(sentences["OutTrue"].to_vector<double>() == std::vector<double>{0, 4, 5});
  CHECK(sentences["OutTrue"].lod() == LoD{{0, 1, 3}});
  CHECK(sentences["OutFalse"].lod() == LoD{{0, 3}});
  Program p = OpTest("split_lod_tensor").input("X", LoDTensor(x, lod)).input("Mask", mask_of({1, 0, 1})).attr("level", 1).build();
  CHECK(p.global_block().var("OutTrue_0").lod_level() == 1);

  auto back = OpTest("merge_lod_tensor").input("InTrue", sentences["OutTrue"]).input("InFalse", sentences["OutFalse"]).input("X", LoDTensor(x, lod))
                  .input("Mask", mask_of({1, 0, 1})).attr("level", 1).run()["Out"];
  check_close(back, x, 0, 0, "merge by sentences");
  CHECK(back.lod() == lod);
}

TEST_CASE("split_lod_tensor: grad is the merge of the output gradients (f64): mixed, all-true, all-false, sequences") {
  auto x = random_tensor<double>({5, 3}, -1, 1, 4);
  OpTest("split_lod_tensor").input("X", LoDTensor(x)).input("Mask", mask_of({0, 1, 1, 0, 1})).check_grad({"X"}, {"OutTrue", "OutFalse"});
  // With every row on one side the other output is empty; only the non-empty one seeds the loss (its gradient
  // is the zeros the harness feeds for an unseeded output).
  OpTest("split_lod_tensor").input("X", LoDTensor(x)).input("Mask", mask_of({1, 1, 1, 1, 1})).check_grad({"X"}, {"OutTrue"});
  OpTest("split_lod_tensor").input("X", LoDTensor(x)).input("Mask", mask_of({0, 0, 0, 0, 0})).check_grad({"X"}, {"OutFalse"});
  const LoD lod{{0, 2, 2, 3, 5}};
  OpTest("split_lod_tensor").input("X", LoDTensor(x, lod)).input("Mask", mask_of({1, 0, 1, 0})).check_grad({"X"}, {"OutTrue", "OutFalse"});
  OpTest("split_lod_tensor").input("X", LoDTensor(x, lod)).input("Mask", mask_of({0, 1, 0, 1})).check_grad({"X"}, {"OutTrue"});
}

// ---- merge_lod_tensor

TEST_CASE_TEMPLATE("merge_lod_tensor: row i comes from InTrue when Mask[i], else from InFalse, in order", T, float, double, int64_t) {
  const std::vector<int> m{0, 1, 1, 0, 0, 1, 0};
  auto t = random_tensor<T>({3, 2, 2}, -9, 9, 1);
  auto f = random_tensor<T>({4, 2, 2}, -9, 9, 2);
  auto x = LoDTensor(random_tensor<float>({7, 1}));  // only its rows matter
  auto out = OpTest("merge_lod_tensor").input("InTrue", LoDTensor(t)).input("InFalse", LoDTensor(f)).input("X", x).input("Mask", mask_of(m)).unknown_batch()
                 .run()["Out"];
  CHECK(out.dtype() == dtype_of<T>);
  check_close(to_f64(out), naive_merge(to_f64(t), to_f64(f), 7, {}, m), 0, 0, "merge");
}

TEST_CASE("merge_lod_tensor: a side no row comes from is not read: stale values of another row count are left alone") {
  auto x = LoDTensor(random_tensor<double>({4, 2}, -1, 1, 3));
  auto stale = LoDTensor(random_tensor<double>({9, 2}, 100, 200, 4));
  auto t = LoDTensor(random_tensor<double>({4, 2}, -1, 1, 5));
  auto all_true = OpTest("merge_lod_tensor").input("InTrue", t).input("InFalse", stale).input("X", x).input("Mask", mask_of({1, 1, 1, 1})).run()["Out"];
  check_close(all_true, t, 0, 0, "all true");
  auto all_false = OpTest("merge_lod_tensor").input("InTrue", stale).input("InFalse", t).input("X", x).input("Mask", mask_of({0, 0, 0, 0})).run()["Out"];
  check_close(all_false, t, 0, 0, "all false");
  // By sequences: the true ones are all empty, so InTrue gives no rows and is not read.
  auto seqs = OpTest("merge_lod_tensor").input("InTrue", stale).input("InFalse", t).input("X", LoDTensor(x, {{0, 0, 2, 4, 4}}))
                  .input("Mask", mask_of({1, 0, 0, 1})).run()["Out"];
  check_close(seqs, t, 0, 0, "true sequences all empty");
  CHECK(seqs.lod() == LoD{{0, 0, 2, 4, 4}});
}

TEST_CASE("merge_lod_tensor: sequences by X's LoD, with empty and length-1 sequences") {
  const std::vector<size_t> lengths{1, 0, 3, 2, 0};
  const LoD lod = offsets_of(lengths);
  const std::vector<int> m{0, 1, 1, 0, 1};
  auto t = random_tensor<double>({3, 2}, -1, 1, 6);  // sequences 1, 2, 4: 0 + 3 + 0 rows
  auto f = random_tensor<double>({3, 2}, -1, 1, 7);  // sequences 0, 3: 1 + 2 rows
  auto x = LoDTensor(random_tensor<double>({6, 1}), lod);
  auto out = OpTest("merge_lod_tensor").input("InTrue", LoDTensor(t, {{0, 0, 3, 3}})).input("InFalse", LoDTensor(f, {{0, 1, 3}})).input("X", x)
                 .input("Mask", mask_of(m)).unknown_batch().run()["Out"];
  check_close(out, naive_merge(t, f, 6, lod[0], m), 0, 0, "merge by sequences");
  CHECK(out.lod() == lod);
}

TEST_CASE("merge_lod_tensor: grad splits Out@GRAD by the mask (f64); a side that was not read gets zeros of its shape") {
  const std::vector<int> m{0, 1, 1, 0, 1};
  auto t = LoDTensor(random_tensor<double>({3, 2}, -1, 1, 1));
  auto f = LoDTensor(random_tensor<double>({2, 2}, -1, 1, 2));
  auto x = LoDTensor(random_tensor<double>({5, 2}));
  OpTest("merge_lod_tensor").input("InTrue", t).input("InFalse", f).input("X", x).input("Mask", mask_of(m)).check_grad({"InTrue", "InFalse"}, {"Out"});
  auto stale = LoDTensor(random_tensor<double>({7, 2}, -1, 1, 3));
  auto x2 = LoDTensor(random_tensor<double>({2, 2}));
  OpTest("merge_lod_tensor").input("InTrue", f).input("InFalse", stale).input("X", x2).input("Mask", mask_of({1, 1})).check_grad({"InTrue", "InFalse"}, {"Out"});
  OpTest("merge_lod_tensor").input("InTrue", stale).input("InFalse", f).input("X", x2).input("Mask", mask_of({0, 0})).check_grad({"InTrue", "InFalse"}, {"Out"});
  // Sequences, with an empty and a length-1 one.
  auto xs = LoDTensor(random_tensor<double>({5, 1}), {{0, 2, 2, 3, 5}});
  OpTest("merge_lod_tensor").input("InTrue", LoDTensor(f.clone(), {{0, 2, 2}})).input("InFalse", LoDTensor(t.clone(), {{0, 1, 3}})).input("X", xs)
      .input("Mask", mask_of({1, 1, 0, 0})).check_grad({"InTrue", "InFalse"}, {"Out"});
}

// ---- errors

TEST_CASE("split_lod_tensor / merge_lod_tensor: a mask of the wrong length or dtype, rows or widths that do not fit are oar::Errors naming the op") {
  auto x = LoDTensor(random_tensor<float>({4, 3}));
  auto len = error_of([&] { OpTest("split_lod_tensor").input("X", x).input("Mask", mask_of({1, 0, 1})).run(); });
  CHECK(contains(len, "split_lod_tensor: Mask ('Mask_0') [3, 1] must hold one entry per row of X ('X_0') [4, 3], which has 4"));
  auto seq = error_of([&] { OpTest("split_lod_tensor").input("X", LoDTensor(x, {{0, 1, 4}})).input("Mask", mask_of({1, 0, 1})).run(); });
  CHECK(contains(seq, "must hold one entry per sequence of X ('X_0') [4, 3], which has 2"));
  auto type = error_of([&] { OpTest("split_lod_tensor").input("X", x).input("Mask", LoDTensor(random_tensor<int64_t>({4, 1}, 0, 2))).build(); });
  CHECK(contains(type, "split_lod_tensor: Mask ('Mask_0') must be bool, got i64"));
  auto wide = error_of([&] { OpTest("split_lod_tensor").input("X", x).input("Mask", LoDTensor(Tensor(Shape{4, 2}, boolean))).build(); });
  CHECK(contains(wide, "Mask ('Mask_0') must be [N] or [N, 1] (one entry per item), got [4, 2]"));
  auto level = error_of([&] { OpTest("split_lod_tensor").input("X", LoDTensor(x, {{0, 1, 4}})).input("Mask", mask_of({1, 0})).attr("level", 1).build(); });
  CHECK(contains(level, "level 1 is not a LoD level of X ('X_0'), which has 1"));

  auto t = LoDTensor(random_tensor<float>({2, 3}));
  auto widths = error_of([&] {
    OpTest("merge_lod_tensor").input("InTrue", t).input("InFalse", LoDTensor(random_tensor<float>({2, 4}))).input("X", x).input("Mask", mask_of({1, 0, 1, 0})).build();
  });
  CHECK(contains(widths, "merge_lod_tensor: InTrue ('InTrue_0') [2, 3] and InFalse ('InFalse_0') [2, 4] differ past the rows"));
  auto dtypes = error_of([&] {
    OpTest("merge_lod_tensor").input("InTrue", t).input("InFalse", LoDTensor(random_tensor<double>({2, 3}))).input("X", x).input("Mask", mask_of({1, 0, 1, 0})).build();
  });
  CHECK(contains(dtypes, "merge_lod_tensor: InTrue ('InTrue_0') is f32 but InFalse ('InFalse_0') is f64"));
  auto rows = error_of([&] {
    OpTest("merge_lod_tensor").input("InTrue", t).input("InFalse", t).input("X", x).input("Mask", mask_of({1, 1, 1, 0})).run();
  });
  CHECK(contains(rows, "merge_lod_tensor: InTrue ('InTrue_0') [2, 3] must have the 3 rows of the items where Mask ('Mask_0') is true"));
}
