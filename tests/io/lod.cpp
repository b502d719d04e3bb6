// tests/io/lod.cpp: LoD end to end outside the sequence ops: lengths <-> offsets, one sequence of a LoDTensor,
// readers that hand out sequences and batches that join them without padding, printing, and the executor's
// check of a fed LoD against the variable's lod_level.
#include "pch.hpp"

#include <sstream>

#include "oar/io/dataset.hpp"

using namespace oar;
using namespace oar::io;

namespace {

/// Rows 0..n-1 of one column, value = row index (so a row's value says where it came from).
Tensor rows(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = i;
  return Tensor::from<int64_t>(v, {n, 1});
}

}  // namespace

TEST_CASE("lod: lengths and offsets are two spellings of one LoD") {
  CHECK(lod_from_lengths({{3, 1, 2}}) == LoD{{0, 3, 4, 6}});
  CHECK(lod_from_lengths({{2, 0, 1}, {3, 2, 4}}) == LoD{{0, 2, 2, 3}, {0, 3, 5, 9}});
  CHECK(lod_lengths(LoD{{0, 3, 4, 6}}) == Lengths{{3, 1, 2}});
  LoDTensor t = LoDTensor::from_lengths(rows(6), {{3, 1, 2}});
  CHECK(t.lod() == LoD{{0, 3, 4, 6}});
  CHECK(t.num_sequences() == 3);
  CHECK(t.lengths() == Lengths{{3, 1, 2}});
  CHECK_THROWS_WITH_AS(LoDTensor::from_lengths(rows(5), {{3, 1, 2}}), doctest::Contains("level 0 ends at 6 but 5 rows follow"), Error);
}

TEST_CASE("lod: sequence(i) is a view of its rows with its lower levels rebased") {
  // Two paragraphs of 2 and 1 sentences; sentences of 3, 2 and 4 words.
  LoDTensor t = LoDTensor::from_lengths(rows(9), {{2, 1}, {3, 2, 4}});
  LoDTensor p0 = t.sequence(0), p1 = t.sequence(1);
  CHECK(p0.lod() == LoD{{0, 2}, {0, 3, 5}});
  CHECK(p0.shape() == Shape{5, 1});
  CHECK(p0.raw() == t.raw());  // no copy
  CHECK(p1.lod() == LoD{{0, 1}, {0, 4}});
  CHECK(p1.to_vector<int64_t>() == std::vector<int64_t>{5, 6, 7, 8});
  LoDTensor e = LoDTensor::from_lengths(rows(2), {{0, 2}}).sequence(0);  // an empty sequence
  CHECK(e.shape() == Shape{0, 1});
  CHECK(e.lod() == LoD{{0, 0}});
  CHECK_THROWS_WITH_AS(t.sequence(2), doctest::Contains("sequence 2 of a LoDTensor with 2 sequences"), Error);
}

TEST_CASE("lod: a reader hands out sequences and batch joins them into one LoD tensor, no padding") {
  LoDTensor words = LoDTensor::from_lengths(rows(12), {{7, 0, 1, 4}});
  Tensor labels = Tensor::from<int64_t>({10, 11, 12, 13}, {4, 1});
  Reader items = Reader::from_tensors({words, labels});
  auto s0 = *items.next();
  CHECK(s0[0].shape() == Shape{7, 1});
  CHECK(s0[0].lod() == LoD{{0, 7}});
  CHECK(s0[1].shape() == Shape{1});
  CHECK(s0[1].lod().empty());

  Reader r = Reader::from_tensors({words, labels}).batch(3);
  auto b0 = *r.next();
  CHECK(b0[0].shape() == Shape{8, 1});
  CHECK(b0[0].lod() == LoD{{0, 7, 7, 8}});  // the empty sequence keeps its place
  CHECK(b0[0].to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(b0[1].shape() == Shape{3, 1});
  auto b1 = *r.next();
  CHECK(b1[0].lod() == LoD{{0, 4}});
  CHECK(b1[0].to_vector<int64_t>() == std::vector<int64_t>{8, 9, 10, 11});
  CHECK(b1[1].to_vector<int64_t>() == std::vector<int64_t>{13});

  // Two levels join level by level.
  LoDTensor paras = LoDTensor::from_lengths(rows(9), {{2, 1}, {3, 2, 4}});
  auto both = *Reader::from_tensors({paras}).batch(2).next();
  CHECK(both[0].lod() == LoD{{0, 2, 3}, {0, 3, 5, 9}});

  // A sequence field and a plain one of the same item count; mismatched counts are refused.
  CHECK_THROWS_WITH_AS(Reader::from_tensors({words, Tensor::from<int64_t>({1, 2}, {2, 1})}), doctest::Contains("field 1 has 2 rows, field 0 has 4"),
                       Error);
  // Items that disagree in their trailing dims or LoD levels cannot be joined.
  std::vector<Sample> bad{{LoDTensor::from_lengths(rows(2), {{2}})}, {LoDTensor::from_lengths(Tensor(Shape{2, 3}, i64), {{2}})}};
  CHECK_THROWS_WITH_AS(stack_samples(bad), doctest::Contains("may differ only in its first dim"), Error);
}

TEST_CASE("lod: printing a tensor shows its values, a LoDTensor its levels and sequences") {
  Tensor m = Tensor::from<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(to_string(m) == "f32[2, 3] cpu\n[[1, 2, 3],\n [4, 5, 6]]");
  LoDTensor t = LoDTensor::from_lengths(Tensor::from<float>({1, 2, 3, 4, 5, 6}, {3, 2}), {{2, 0, 1}});
  std::ostringstream os;
  os << t;
  CHECK(os.str() == "f32[3, 2] cpu lod [[0, 2, 2, 3]] lengths [[2, 0, 1]]\n"
                    "seq 0 (rows 0..2): [[1, 2],\n   [3, 4]]\n"
                    "seq 1 (rows 2..2): []\n"
                    "seq 2 (rows 2..3): [[5, 6]]\n");
  CHECK(to_string(Tensor::from<float>(std::vector<float>(100, 0.5f)), 4) == "f32[100] cpu\n[0.5, 0.5, 0.5, 0.5, ...]");
}

TEST_CASE("lod: the executor checks a fed LoD against the variable's lod_level") {
  Tape tape;
  auto words = data("words", i64, {-1, 1}).lod_level(1);
  auto plain = data("plain", f32, {-1, 2});
  auto emb = embedding(words, {20, 4});
  auto y = oar::scale(plain, 2.0f);
  Model model(tape.program({emb, y}));
  Evaluator ev(model, {emb, y});
  LoDTensor ids = LoDTensor::from_lengths(Tensor::from<int64_t>({1, 2, 3, 4, 5}, {5, 1}), {{3, 0, 2}});
  Tensor p = Tensor::from<float>({1, 2}, {1, 2});
  // The LoD rides through: embedding keeps the LoD of its ids.
  auto out = ev.forward(FeedMap{{"words", ids}, {"plain", p}});
  CHECK(out[0].shape() == Shape{5, 4});
  CHECK(out[0].lod() == ids.lod());
  CHECK(out[1].lod().empty());
  CHECK_THROWS_WITH_AS(ev.forward(FeedMap{{"words", ids}, {"plain", LoDTensor(p, {{0, 1}})}}),
                       doctest::Contains("feed 'plain': the tensor has 1 LoD level(s) but the variable has none"), Error);
  CHECK_THROWS_WITH_AS(ev.forward(FeedMap{{"words", LoDTensor(Tensor(ids))}, {"plain", p}}),
                       doctest::Contains("feed 'words': the variable has lod_level 1, the tensor 0 LoD level(s)"), Error);
}
