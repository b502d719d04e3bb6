// tests/io/reader.cpp: readers: sources, batch, shuffle, map, take, prefetch, several epochs, and resuming
// from a saved (epoch, position) exactly where an uninterrupted run would be.
#include "pch.hpp"

#include <atomic>
#include <chrono>
#include <set>
#include <thread>

#include "oar/io/dataset.hpp"

using namespace oar;
using namespace oar::io;

namespace {

/// n samples {x f32 [2] = (i, -i), y i64 [1] = i}.
std::vector<Sample> make_samples(int n) {
  std::vector<Sample> v;
  for (int i = 0; i < n; ++i) v.push_back({Tensor::from<float>({float(i), float(-i)}), Tensor::from<int64_t>({int64_t(i)}, Shape{1})});
  return v;
}

/// The y values of a batch or sample, flattened.
std::vector<int64_t> ids(const Sample& s) { return s[1].to_vector<int64_t>(); }

/// Every item of the current epoch, as lists of ids.
std::vector<std::vector<int64_t>> run_epoch(Reader& r) {
  std::vector<std::vector<int64_t>> out;
  for (auto& s : r) out.push_back(ids(s));
  return out;
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& v) {
  std::vector<int64_t> f;
  for (auto& x : v) f.insert(f.end(), x.begin(), x.end());
  return f;
}

/// The pipeline the resume tests use: shuffle, map, batch, optionally prefetch.
Reader pipeline(bool prefetch) {
  Reader r = Reader::from_samples(make_samples(23)).shuffle(5, 9).map([](Sample s) {
    s[0] = s[0].clone();
    s[0].data<float>()[1] *= 10;
    return s;
  }).batch(4);
  return prefetch ? r.prefetch(2) : r;
}

}  // namespace

TEST_CASE("reader: from_samples yields the samples in order, once per epoch, and tracks epoch and position") {
  Reader r = Reader::from_samples(make_samples(5));
  CHECK(r.state() == ReaderState{0, 0});
  auto e0 = run_epoch(r);
  CHECK(flat(e0) == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(r.state() == ReaderState{1, 0});
  CHECK(flat(run_epoch(r)) == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(r.epoch() == 2);

  // breaking out keeps the position; the next loop continues
  for (auto& s : r) {
    if (ids(s)[0] == 1) break;
  }
  CHECK(r.state() == ReaderState{2, 2});
  CHECK(flat(run_epoch(r)) == std::vector<int64_t>{2, 3, 4});
  CHECK(r.state() == ReaderState{3, 0});

  // next() and skip()
  CHECK(ids(*r.next())[0] == 0);
  CHECK(r.skip(2) == 2);
  CHECK(ids(*r.next())[0] == 3);
  CHECK(r.skip(10) == 1);
  CHECK(r.position() == 5);
  CHECK_FALSE(r.next().has_value());
  CHECK(r.state() == ReaderState{4, 0});

  // an empty reader yields nothing and still advances the epoch
  Reader empty = Reader::from_samples({});
  CHECK(run_epoch(empty).empty());
  CHECK(empty.epoch() == 1);
  CHECK_THROWS_AS(Reader().next(), Error);
}

TEST_CASE("reader: from_tensors splits rows into samples without copying") {
  Tensor x(Shape{4, 3}, f32), y(Shape{4}, i64);
  for (int i = 0; i < 12; ++i) x.data<float>()[i] = float(i);
  for (int i = 0; i < 4; ++i) y.data<int64_t>()[i] = 10 + i;
  Reader r = Reader::from_tensors({x, y});
  int i = 0;
  for (auto& s : r) {
    CHECK(s[0].shape() == Shape{3});
    CHECK(s[0].data<float>()[2] == float(3 * i + 2));
    CHECK(s[0].raw() == static_cast<float*>(x.raw()) + 3 * i);
    CHECK(s[1].shape() == Shape{});
    CHECK(s[1].data<int64_t>()[0] == 10 + i);
    ++i;
  }
  CHECK(i == 4);
  Reader b = Reader::from_tensors({x, y}).batch(3);
  auto first = *b.next();
  CHECK(first[0].shape() == Shape{3, 3});
  CHECK(first[1].shape() == Shape{3});  // scalar fields stack to [n]
  CHECK_THROWS_WITH_AS(Reader::from_tensors({x, Tensor(Shape{5}, i64)}), doctest::Contains("field 1 has 5 rows, field 0 has 4"), Error);
}

TEST_CASE("reader: batch stacks each field to [n, ...], the last batch holds the rest unless drop_last") {
  Reader r = Reader::from_samples(make_samples(10)).batch(4);
  std::vector<Batch> bs;
  for (auto& b : r) bs.push_back(b);
  REQUIRE(bs.size() == 3);
  CHECK(bs[0][0].shape() == Shape{4, 2});
  CHECK(bs[0][0].dtype() == f32);
  CHECK(bs[0][1].shape() == Shape{4, 1});
  CHECK(bs[0][1].dtype() == i64);
  CHECK(bs[2][0].shape() == Shape{2, 2});
  CHECK(bs[2][1].shape() == Shape{2, 1});
  CHECK(bs[1][0].to_vector<float>() == std::vector<float>{4, -4, 5, -5, 6, -6, 7, -7});
  CHECK(ids(bs[2]) == std::vector<int64_t>{8, 9});

  Reader d = Reader::from_samples(make_samples(10)).batch(4, true);
  CHECK(run_epoch(d).size() == 2);
  CHECK(Reader::from_samples(make_samples(3)).batch(4, true).skip(5) == 0);
  CHECK(Reader::from_samples(make_samples(3)).batch(4).skip(5) == 1);

  // fields that disagree: an error naming the field and the sample
  auto bad = make_samples(3);
  bad[2][0] = Tensor::from<float>({1.f, 2.f, 3.f});
  Reader rb = Reader::from_samples(bad).batch(3);
  CHECK_THROWS_WITH_AS(rb.next(), doctest::Contains("batch: field 0 of sample 2 is f32 [3], but sample 0 has f32 [2]"), Error);
  CHECK_THROWS_AS(Reader::from_samples(make_samples(3)).batch(0), Error);
}

TEST_CASE("reader: shuffle is a permutation per buffer, deterministic for a seed, and new every epoch") {
  const int n = 103;
  Reader a = Reader::from_samples(make_samples(n)).shuffle(1000, 7);
  Reader b = Reader::from_samples(make_samples(n)).shuffle(1000, 7);
  Reader c = Reader::from_samples(make_samples(n)).shuffle(1000, 8);
  auto a0 = flat(run_epoch(a)), b0 = flat(run_epoch(b)), c0 = flat(run_epoch(c));
  auto a1 = flat(run_epoch(a));
  CHECK(a0 == b0);
  CHECK(a0 != c0);
  CHECK(a0 != a1);
  std::vector<int64_t> sorted = a0;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(n);
  for (int i = 0; i < n; ++i) iota[size_t(i)] = i;
  CHECK(sorted == iota);
  CHECK(a0 != iota);
  // reopening epoch 1 from scratch gives epoch 1's order again
  Reader again = Reader::from_samples(make_samples(n)).shuffle(1000, 7);
  again.restore({1, 0});
  CHECK(flat(run_epoch(again)) == a1);

  // Paddle's buffered shuffle: blocks of `buffer` consecutive items, each shuffled within itself
  Reader blk = Reader::from_samples(make_samples(n)).shuffle(10, 3);
  auto o = flat(run_epoch(blk));
  REQUIRE(o.size() == size_t(n));
  for (size_t i = 0; i < o.size(); ++i) CHECK(o[i] / 10 == int64_t(i) / 10);
  CHECK(o != iota);
  CHECK_THROWS_AS(Reader::from_samples(make_samples(3)).shuffle(0, 1), Error);
}

TEST_CASE("reader: map and take") {
  Reader r = Reader::from_samples(make_samples(6)).map([](Sample s) {
    Tensor y(Shape{1}, i64);
    y.data<int64_t>()[0] = s[1].data<int64_t>()[0] * 100;
    return Sample{s[0], y};
  });
  CHECK(flat(run_epoch(r)) == std::vector<int64_t>{0, 100, 200, 300, 400, 500});
  Reader t = r.take(4);
  CHECK(flat(run_epoch(t)) == std::vector<int64_t>{0, 100, 200, 300});
  CHECK(flat(run_epoch(t)) == std::vector<int64_t>{0, 100, 200, 300});
  CHECK(t.skip(3) == 3);
  CHECK(t.skip(3) == 1);
  Reader none = Reader::from_samples(make_samples(6)).take(0).batch(2).shuffle(2, 1);
  CHECK(run_epoch(none).empty());
  Reader more = Reader::from_samples(make_samples(2)).take(9);
  CHECK(flat(run_epoch(more)) == std::vector<int64_t>{0, 1});
}

TEST_CASE("reader: prefetch yields exactly the sequence without prefetch, over several epochs") {
  for (int k : {1, 2, 16}) {
    CAPTURE(k);
    Reader plain = Reader::from_samples(make_samples(50)).shuffle(16, 4).batch(3);
    Reader pre = plain.prefetch(k);
    Reader pre2 = Reader::from_samples(make_samples(50)).prefetch(k).shuffle(16, 4).prefetch(k).batch(3).prefetch(k);
    for (int e = 0; e < 3; ++e) {
      auto want = run_epoch(plain);
      CHECK(run_epoch(pre) == want);
      CHECK(run_epoch(pre2) == want);
    }
  }
}

TEST_CASE("reader: an exception in the producer reaches the consumer after the items before it") {
  auto make = [](int fail_at) {
    return Reader::from_creator([fail_at](int64_t) {
      auto i = std::make_shared<int>(0);
      return Reader::Generator([i, fail_at]() -> std::optional<Sample> {
        if (*i == fail_at) throw Error(fmt::format("bad record {}", *i));
        if (*i == 10) return std::nullopt;
        Sample s{Tensor::from<int64_t>({int64_t((*i)++)}, Shape{1}), Tensor::from<int64_t>({int64_t(*i - 1)}, Shape{1})};
        return s;
      });
    });
  };
  for (bool prefetch : {false, true}) {
    CAPTURE(prefetch);
    Reader r = prefetch ? make(5).prefetch(3) : make(5);
    std::vector<int64_t> got;
    CHECK_THROWS_WITH_AS(
        [&] {
          for (auto& s : r) got.push_back(ids(s)[0]);
        }(),
        doctest::Contains("bad record 5"), Error);
    CHECK(got == std::vector<int64_t>{0, 1, 2, 3, 4});
    CHECK(r.state() == ReaderState{0, 5});
    // a batch that spans the failure fails as a whole
    Reader rb = prefetch ? make(5).batch(4).prefetch(2) : make(5).batch(4);
    CHECK(ids(*rb.next()) == std::vector<int64_t>{0, 1, 2, 3});
    CHECK_THROWS_WITH_AS(rb.next(), doctest::Contains("bad record 5"), Error);
  }
  Reader ok = make(-1).prefetch(4);
  CHECK(flat(run_epoch(ok)) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(flat(run_epoch(ok)) == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_CASE("reader: destroying a prefetching reader mid-epoch stops its thread") {
  std::atomic<int> produced{0};
  auto src = Reader::from_indexed(1000000, [&produced](int64_t i) {
    ++produced;
    return Sample{Tensor::from<int64_t>({i}, Shape{1}), Tensor::from<int64_t>({i}, Shape{1})};
  });
  {
    Reader r = src.prefetch(4);
    CHECK(ids(*r.next())[0] == 0);
    CHECK(ids(*r.next())[0] == 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }  // joins here; the bounded queue kept the producer from running ahead
  int after = produced.load();
  CHECK(after <= 2 + 4 + 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(produced.load() == after);

  // a slow upstream: destruction waits for the item in flight, then returns
  {
    Reader slow = Reader::from_indexed(100, [](int64_t i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return Sample{Tensor::from<int64_t>({i}, Shape{1}), Tensor::from<int64_t>({i}, Shape{1})};
    }).prefetch(2);
    CHECK(ids(*slow.next())[0] == 0);
  }
  // restore() while the thread runs also stops it and reopens at the new position
  Reader r = src.take(100).prefetch(8);
  r.next();
  r.restore({3, 40});
  CHECK(ids(*r.next())[0] == 40);
}

TEST_CASE("reader: resuming at (epoch, position) yields what an uninterrupted run yields") {
  for (bool prefetch : {false, true}) {
    CAPTURE(prefetch);
    Reader full = pipeline(prefetch);
    std::vector<std::vector<std::vector<int64_t>>> epochs;
    std::vector<std::vector<std::vector<float>>> xs;
    for (int e = 0; e < 3; ++e) {
      epochs.emplace_back();
      xs.emplace_back();
      for (auto& b : full) {
        epochs.back().push_back(ids(b));
        xs.back().push_back(b[0].to_vector<float>());
      }
    }
    REQUIRE(epochs[0].size() == 6);  // 23 samples in batches of 4
    CHECK(epochs[0] != epochs[1]);

    for (int e = 0; e < 2; ++e) {
      for (int k = 0; k <= 6; ++k) {
        CAPTURE(e);
        CAPTURE(k);
        Reader r = pipeline(prefetch);
        r.restore({e, k});
        std::vector<std::vector<int64_t>> rest;
        std::vector<std::vector<float>> rest_x;
        for (auto& b : r) {
          rest.push_back(ids(b));
          rest_x.push_back(b[0].to_vector<float>());
        }
        CHECK(rest == std::vector<std::vector<int64_t>>(epochs[size_t(e)].begin() + k, epochs[size_t(e)].end()));
        CHECK(rest_x == std::vector<std::vector<float>>(xs[size_t(e)].begin() + k, xs[size_t(e)].end()));
        CHECK(run_epoch(r) == epochs[size_t(e) + 1]);
      }
    }

    // a checkpoint taken inside the loop: the state after batch 2 of epoch 1
    Reader live = pipeline(prefetch);
    run_epoch(live);
    ReaderState saved;
    int i = 0;
    for (auto& b : live) {
      (void)b;
      if (i++ == 2) {
        saved = live.state();
        break;
      }
    }
    CHECK(saved == ReaderState{1, 3});
    Reader resumed = pipeline(prefetch);
    resumed.restore(saved);
    CHECK(run_epoch(resumed) == std::vector<std::vector<int64_t>>(epochs[1].begin() + 3, epochs[1].end()));
    // skip(n) on the reader equals consuming n items
    Reader sk = pipeline(prefetch);
    CHECK(sk.skip(4) == 4);
    CHECK(run_epoch(sk) == std::vector<std::vector<int64_t>>(epochs[0].begin() + 4, epochs[0].end()));
    // a copy takes the cursor along
    Reader cp = live;
    CHECK(cp.state() == ReaderState{1, 3});
    CHECK(run_epoch(cp) == run_epoch(live));
  }
}

TEST_CASE("reader: resume through a shuffle whose buffer does not divide the data, with take and drop_last") {
  auto make = [] { return Reader::from_samples(make_samples(37)).shuffle(8, 123).take(30).batch(7, true).shuffle(3, 5); };
  Reader full = make();
  std::vector<std::vector<std::vector<int64_t>>> epochs;
  for (int e = 0; e < 2; ++e) epochs.push_back(run_epoch(full));
  REQUIRE(epochs[0].size() == 4);
  for (int64_t k = 0; k <= 5; ++k) {
    Reader r = make();
    r.restore({1, k});
    auto rest = run_epoch(r);
    size_t from = std::min<size_t>(size_t(k), epochs[1].size());
    CHECK(rest == std::vector<std::vector<int64_t>>(epochs[1].begin() + long(from), epochs[1].end()));
  }
}
