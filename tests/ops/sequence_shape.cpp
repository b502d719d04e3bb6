// tests/ops/sequence_shape.cpp: sequence_reshape, sequence_slice, sequence_pad and sequence_unpad against plain
// references (empty and length-1 sequences, two-level LoD), their X gradients by finite differences, the LoD and
// argument errors, and their layer functions in a model whose input gradient matches finite differences.
#include "pch.hpp"
#include "support/op_check.hpp"

using namespace oar;
using namespace oar::test;

namespace {

std::vector<size_t> offsets_of(const std::vector<size_t>& lens) {
  std::vector<size_t> o{0};
  for (size_t l : lens) o.push_back(o.back() + l);
  return o;
}

/// The flat elements of t as doubles.
std::vector<double> values(const Tensor& t) {
  std::vector<double> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.get(int64_t(i));
  return v;
}

/// sequence_slice by hand: the rows [off, off + len) of each sequence of `offs`, and the new offsets.
std::pair<Tensor, std::vector<size_t>> naive_slice(const Tensor& x, const std::vector<size_t>& offs, const std::vector<int64_t>& off,
                                                   const std::vector<int64_t>& len) {
  const int64_t row = x.dim(0) ? x.numel() / x.dim(0) : 0;
  std::vector<double> out;
  std::vector<size_t> o{0};
  for (size_t s = 0; s + 1 < offs.size(); ++s) {
    for (int64_t r = int64_t(offs[s]) + off[s]; r < int64_t(offs[s]) + off[s] + len[s]; ++r)
      for (int64_t k = 0; k < row; ++k) out.push_back(x.get(r * row + k));
    o.push_back(o.back() + size_t(len[s]));
  }
  Shape sh = x.shape();
  sh[0] = int64_t(o.back());
  return {Tensor::from<double>(out, sh), o};
}

/// sequence_pad by hand over sequences given in rows (`rows`: S + 1 absolute offsets).
Tensor naive_pad(const Tensor& x, const std::vector<size_t>& rows, int64_t padded, const Tensor& pad) {
  const int64_t step = x.shape().numel(1, x.rank()), seqs = int64_t(rows.size()) - 1;
  std::vector<double> out;
  for (int64_t s = 0; s < seqs; ++s)
    for (int64_t t = 0; t < padded; ++t)
      for (int64_t k = 0; k < step; ++k) {
        const int64_t r = int64_t(rows[size_t(s)]) + t;
        out.push_back(r < int64_t(rows[size_t(s) + 1]) ? x.get(r * step + k) : pad.get(pad.numel() == 1 ? 0 : k));
      }
  Shape sh{seqs, padded};
  for (int i = 1; i < x.rank(); ++i) sh.push_back(x.dim(i));
  return Tensor::from<double>(out, sh);
}

}  // namespace

// ---- sequence_reshape

TEST_CASE_TEMPLATE("sequence_reshape: rows re-cut per sequence, the data unchanged, the LoD scaled", T, float, double) {
  for (auto [d, nd, lens] : {std::tuple{int64_t(4), 2, std::vector<size_t>{2, 0, 3, 1}}, {int64_t(4), 8, std::vector<size_t>{2, 0, 4, 2}},
                             {int64_t(2), 4, std::vector<size_t>{2, 6}}, {int64_t(3), 3, std::vector<size_t>{1, 1}}, {int64_t(6), 1, std::vector<size_t>{0, 1}},
                             {int64_t(2), 6, std::vector<size_t>{3, 0, 0}}}) {
    auto offs = offsets_of(lens);
    const int64_t n = int64_t(offs.back());
    auto x = random_tensor<T>({n, d}, -1, 1, uint64_t(n * d + nd));
    CAPTURE(d);
    CAPTURE(nd);
    auto out = OpTest("sequence_reshape").input("X", LoDTensor(x, {offs})).attr("new_dim", nd).run()["Out"];
    REQUIRE(out.shape() == Shape{n * d / nd, nd});
    CHECK(values(out) == values(x));
    std::vector<size_t> want;
    for (size_t o : offs) want.push_back(o * size_t(d) / size_t(nd));
    CHECK(out.lod() == LoD{want});
  }
}

TEST_CASE("sequence_reshape: two LoD levels keep the top one and scale the last") {
  auto x = random_tensor<double>({4, 3});
  LoDTensor xl(x, {{0, 1, 3}, {0, 2, 2, 4}});
  auto out = OpTest("sequence_reshape").input("X", xl).attr("new_dim", 6).unknown_batch().run()["Out"];
  CHECK(out.shape() == Shape{2, 6});
  CHECK(out.lod() == LoD{{0, 1, 3}, {0, 1, 1, 2}});
  CHECK(values(out) == values(x));
}

TEST_CASE("sequence_reshape: grad matches finite differences (f64)") {
  OpTest("sequence_reshape").input("X", LoDTensor(random_tensor<double>({6, 4}), {offsets_of({2, 0, 3, 1})})).attr("new_dim", 2).check_grad({"X"}, {"Out"});
  OpTest("sequence_reshape").input("X", LoDTensor(random_tensor<double>({4, 2}), {offsets_of({2, 2})})).attr("new_dim", 4).check_grad({"X"}, {"Out"});
}

TEST_CASE("sequence_reshape: a sequence that does not divide, no LoD, a bad new_dim are oar::Errors") {
  auto m1 = error_of([] {
    OpTest("sequence_reshape").input("X", LoDTensor(random_tensor<float>({4, 3}), {{0, 1, 4}})).attr("new_dim", 2).run();
  });
  CHECK(m1.find("sequence_reshape: sequence 0 has 1 rows of 3 = 3 elements, which do not split into rows of new_dim = 2") != std::string::npos);
  auto m2 = error_of([] { OpTest("sequence_reshape").input("X", random_tensor<float>({4, 3})).attr("new_dim", 2).run(); });
  CHECK(m2.find("sequence_reshape: X ('X_0') has no LoD") != std::string::npos);
  auto m3 = error_of([] { OpTest("sequence_reshape").input("X", LoDTensor(random_tensor<float>({4, 3}), {{0, 4}})).attr("new_dim", 0).build(); });
  CHECK(m3.find("new_dim") != std::string::npos);
  auto m4 = error_of([] { OpTest("sequence_reshape").input("X", LoDTensor(random_tensor<float>({3, 3}), {{0, 3}})).attr("new_dim", 2).build(); });
  CHECK(m4.find("X's 9 elements do not split into rows of new_dim = 2") != std::string::npos);
}

// ---- sequence_slice

TEST_CASE_TEMPLATE("sequence_slice: a sub-sequence of each sequence, with its LoD", T, float, double) {
  struct Case {
    std::vector<size_t> lens;
    std::vector<int64_t> off, len;
  };
  for (auto& cs : {Case{{3, 0, 1, 3}, {1, 0, 0, 1}, {2, 0, 1, 2}}, Case{{1}, {0}, {1}}, Case{{1}, {1}, {0}}, Case{{4, 2}, {0, 2}, {4, 0}},
                   Case{{5, 5, 5}, {4, 0, 2}, {1, 5, 2}}}) {
    auto offs = offsets_of(cs.lens);
    const int64_t n = int64_t(offs.back()), s = int64_t(cs.lens.size());
    auto x = random_tensor<T>({n, 2, 3}, -1, 1, uint64_t(n));
    auto out = OpTest("sequence_slice")
                   .input("X", LoDTensor(x, {offs}))
                   .input("Offset", Tensor::from<int64_t>(cs.off, Shape{s, 1}))
                   .input("Length", Tensor::from<int64_t>(cs.len, Shape{s, 1}))
                   .run()["Out"];
    auto [want, want_offs] = naive_slice(x, offs, cs.off, cs.len);
    check_close(to_f64(out), want, 0, 0, "sequence_slice");
    CHECK(out.lod() == LoD{want_offs});
  }
}

TEST_CASE("sequence_slice: two LoD levels slice the last one and keep the top one") {
  auto x = random_tensor<double>({7, 2});
  LoDTensor xl(x, {{0, 2, 3}, {0, 3, 3, 7}});
  std::vector<int64_t> off{1, 0, 2}, len{1, 0, 2};
  auto out = OpTest("sequence_slice")
                 .input("X", xl)
                 .input("Offset", Tensor::from<int64_t>(off, Shape{3, 1}))
                 .input("Length", Tensor::from<int64_t>(len, Shape{3, 1}))
                 .run()["Out"];
  auto [want, want_offs] = naive_slice(x, {0, 3, 3, 7}, off, len);
  check_close(out, want, 0, 0, "sequence_slice");
  CHECK(out.lod() == LoD{{0, 2, 3}, want_offs});
}

TEST_CASE("sequence_slice: grad matches finite differences (f64); unsliced rows get zeros") {
  auto x = LoDTensor(random_tensor<double>({7, 2}), {offsets_of({3, 0, 1, 3})});
  auto off = Tensor::from<int64_t>({1, 0, 0, 0}, Shape{4, 1});
  auto len = Tensor::from<int64_t>({2, 0, 1, 2}, Shape{4, 1});
  OpTest("sequence_slice").input("X", x).input("Offset", off).input("Length", len).check_grad({"X"}, {"Out"});
}

TEST_CASE("sequence_slice: out-of-range offsets and lengths, a wrong count, no LoD, int32 offsets are oar::Errors") {
  auto x = LoDTensor(random_tensor<float>({5, 2}), {{0, 2, 5}});
  auto run = [&](std::vector<int64_t> off, std::vector<int64_t> len) {
    const int64_t s = int64_t(off.size());
    return error_of([&] {
      OpTest("sequence_slice").input("X", x).input("Offset", Tensor::from<int64_t>(off, Shape{s, 1})).input("Length", Tensor::from<int64_t>(len, Shape{s, 1})).run();
    });
  };
  CHECK(run({0, 2}, {1, 2}).find("sequence_slice: sequence 1 has 3 rows; Offset 2 and Length 2 must satisfy") != std::string::npos);
  CHECK(run({-1, 0}, {1, 1}).find("sequence 0 has 2 rows; Offset -1") != std::string::npos);
  CHECK(run({0, 0}, {1, -1}).find("Length -1") != std::string::npos);
  CHECK(run({0}, {1}).find("must have one entry per sequence of X (2)") != std::string::npos);
  auto m = error_of([&] {
    OpTest("sequence_slice")
        .input("X", random_tensor<float>({5, 2}))
        .input("Offset", Tensor::from<int64_t>({0}, Shape{1, 1}))
        .input("Length", Tensor::from<int64_t>({1}, Shape{1, 1}))
        .run();
  });
  CHECK(m.find("sequence_slice: X ('X_0') has no LoD") != std::string::npos);
  auto m2 = error_of([&] {
    OpTest("sequence_slice").input("X", x).input("Offset", Tensor::from<int32_t>({0, 0}, Shape{2, 1})).input("Length", Tensor::from<int64_t>({1, 1}, Shape{2, 1})).build();
  });
  CHECK(m2.find("Offset must be i64, got i32") != std::string::npos);
}

// ---- sequence_pad / sequence_unpad

TEST_CASE_TEMPLATE("sequence_pad: sequences padded to the longest (or padded_length) with a scalar or a step of PadValue", T, float, double) {
  for (auto lens : {std::vector<size_t>{3, 0, 1, 2}, std::vector<size_t>{1}, std::vector<size_t>{0, 0}, std::vector<size_t>{4, 4}})
    for (int padded : {-1, 6})
      for (bool scalar : {true, false}) {
        auto offs = offsets_of(lens);
        const int64_t n = int64_t(offs.back()), s = int64_t(lens.size());
        auto x = random_tensor<T>({n, 2, 3}, -1, 1, uint64_t(n + 3));
        auto pad = scalar ? Tensor::from<T>({T(-7)}, Shape{1}) : random_tensor<T>({2, 3}, 5, 6, 2);
        auto out = OpTest("sequence_pad").input("X", LoDTensor(x, {offs})).input("PadValue", pad).attr("padded_length", padded).unknown_batch().run();
        const int64_t longest = int64_t(*std::max_element(lens.begin(), lens.end()));
        const int64_t p = padded == -1 ? longest : padded;
        CAPTURE(padded);
        CAPTURE(scalar);
        check_close(to_f64(out["Out"]), naive_pad(x, offs, p, pad), 0, 0, "sequence_pad");
        CHECK(out["Out"].lod().empty());
        REQUIRE(out["Length"].shape() == Shape{s});
        for (int64_t i = 0; i < s; ++i) CHECK(out["Length"].get(i) == double(lens[size_t(i)]));
      }
}

TEST_CASE("sequence_pad: with two LoD levels the top-level sequences are padded, in rows") {
  auto x = random_tensor<double>({7, 2});
  LoDTensor xl(x, {{0, 2, 3}, {0, 3, 3, 7}});  // top-level sequences: rows [0, 3) and [3, 7)
  auto pad = Tensor::from<double>({0.5}, Shape{1});
  auto out = OpTest("sequence_pad").input("X", xl).input("PadValue", pad).run();
  check_close(out["Out"], naive_pad(x, {0, 3, 7}, 4, pad), 0, 0, "sequence_pad");
  CHECK(values(out["Length"]) == std::vector<double>{3, 4});
}

TEST_CASE("sequence_pad: X grad matches finite differences (f64)") {
  auto pad = Tensor::from<double>({0.25}, Shape{1});
  OpTest("sequence_pad").input("X", LoDTensor(random_tensor<double>({6, 2}), {offsets_of({3, 0, 1, 2})})).input("PadValue", pad).check_grad({"X"}, {"Out"});
  OpTest("sequence_pad")
      .input("X", LoDTensor(random_tensor<double>({3, 2, 2}), {offsets_of({1, 2})}))
      .input("PadValue", random_tensor<double>({2, 2}))
      .attr("padded_length", 4)
      .check_grad({"X"}, {"Out"});
}

TEST_CASE("sequence_pad: a short padded_length, no LoD, a bad PadValue, rank-1 X are oar::Errors") {
  auto x = LoDTensor(random_tensor<float>({5, 2}), {{0, 2, 5}});
  auto pad = Tensor::from<float>({0.f}, Shape{1});
  auto m1 = error_of([&] { OpTest("sequence_pad").input("X", x).input("PadValue", pad).attr("padded_length", 2).run(); });
  CHECK(m1.find("sequence_pad: padded_length = 2 is shorter than the longest sequence (3 rows)") != std::string::npos);
  auto m2 = error_of([&] { OpTest("sequence_pad").input("X", random_tensor<float>({5, 2})).input("PadValue", pad).run(); });
  CHECK(m2.find("sequence_pad: X ('X_0') has no LoD") != std::string::npos);
  auto m3 = error_of([&] { OpTest("sequence_pad").input("X", x).input("PadValue", random_tensor<float>({3})).build(); });
  CHECK(m3.find("PadValue must be [1] or a step of X [2], got [3]") != std::string::npos);
  auto m4 = error_of([&] { OpTest("sequence_pad").input("X", LoDTensor(random_tensor<float>({5}), {{0, 5}})).input("PadValue", pad).build(); });
  CHECK(m4.find("rank >= 2") != std::string::npos);
  auto m5 = error_of([&] { OpTest("sequence_pad").input("X", x).input("PadValue", Tensor::from<double>({0.0}, Shape{1})).build(); });
  CHECK(m5.find("PadValue must have X's dtype f32, got f64") != std::string::npos);
}

TEST_CASE_TEMPLATE("sequence_unpad: the first Length[s] steps of each sequence, with LoD from Length", T, float, double) {
  for (auto lens : {std::vector<int64_t>{2, 0, 4}, std::vector<int64_t>{1}, std::vector<int64_t>{0, 0}, std::vector<int64_t>{4, 4, 1}}) {
    const int64_t s = int64_t(lens.size()), l = 4;
    auto x = random_tensor<T>({s, l, 3}, -1, 1, uint64_t(s));
    auto out = OpTest("sequence_unpad").input("X", x).input("Length", Tensor::from<int64_t>(lens, Shape{s})).unknown_batch().run()["Out"];
    std::vector<double> want;
    std::vector<size_t> offs{0};
    for (int64_t i = 0; i < s; ++i) {
      for (int64_t k = 0; k < lens[size_t(i)] * 3; ++k) want.push_back(x.get(i * l * 3 + k));
      offs.push_back(offs.back() + size_t(lens[size_t(i)]));
    }
    check_close(to_f64(out), Tensor::from<double>(want, Shape{int64_t(offs.back()), 3}), 0, 0, "sequence_unpad");
    CHECK(out.lod() == LoD{offs});
  }
}

TEST_CASE("sequence_unpad: sequence_pad then sequence_unpad gives back X and its LoD") {
  auto offs = offsets_of({3, 0, 1, 2});
  auto x = random_tensor<double>({6, 3});
  auto padded = OpTest("sequence_pad").input("X", LoDTensor(x, {offs})).input("PadValue", Tensor::from<double>({9.0}, Shape{1})).attr("padded_length", 5).run();
  auto back = OpTest("sequence_unpad").input("X", padded["Out"]).input("Length", padded["Length"]).run()["Out"];
  check_close(back, x, 0, 0, "round trip");
  CHECK(back.lod() == LoD{offs});
}

TEST_CASE("sequence_unpad: X grad matches finite differences (f64); padding steps get zeros") {
  OpTest("sequence_unpad").input("X", random_tensor<double>({3, 4, 2})).input("Length", Tensor::from<int64_t>({2, 0, 4}, Shape{3})).check_grad({"X"}, {"Out"});
  OpTest("sequence_unpad").input("X", random_tensor<double>({2, 3})).input("Length", Tensor::from<int64_t>({1, 3}, Shape{2})).check_grad({"X"}, {"Out"});
}

TEST_CASE("sequence_unpad: a length past the steps, a wrong count, a bad dtype are oar::Errors") {
  auto x = random_tensor<float>({2, 3, 2});
  auto m1 = error_of([&] { OpTest("sequence_unpad").input("X", x).input("Length", Tensor::from<int64_t>({1, 4}, Shape{2})).run(); });
  CHECK(m1.find("sequence_unpad: Length[1] = 4 is outside [0, 3]") != std::string::npos);
  auto m2 = error_of([&] { OpTest("sequence_unpad").input("X", x).input("Length", Tensor::from<int64_t>({-1, 1}, Shape{2})).run(); });
  CHECK(m2.find("Length[0] = -1") != std::string::npos);
  auto m3 = error_of([&] { OpTest("sequence_unpad").input("X", x).input("Length", Tensor::from<int64_t>({1, 1, 1}, Shape{3})).build(); });
  CHECK(m3.find("Length has 3 entries but X has 2 sequences") != std::string::npos);
  auto m4 = error_of([&] { OpTest("sequence_unpad").input("X", x).input("Length", Tensor::from<int32_t>({1, 1}, Shape{2})).build(); });
  CHECK(m4.find("Length must be i64, got i32") != std::string::npos);
}

// ---- the layer functions

TEST_CASE("sequence_shape layers: conv, pad, unpad, reshape and slice in one model; the input gradient matches finite differences") {
  Tape tape;
  auto x = data("x", f64, {-1, 2}).lod_level(1).stop_gradient(false);
  auto off = data("off", i64, {-1, 1});
  auto len = data("len", i64, {-1, 1});
  auto h = sequence_conv(x, 3, 3).act(oar::tanh);
  auto p = sequence_pad(h, fill_constant({1}, f64, 0.5)).padded_length(5);
  auto u = sequence_unpad(p, p.length());
  auto r = sequence_reshape(u, 6);
  auto s = sequence_slice(r, off, len);
  auto loss = mean(elementwise_mul(s, s));
  CHECK(p.shape() == Shape{-1, 5, 3});
  CHECK(p.length().dtype() == i64);
  CHECK(u.lod_level() == 1);
  CHECK(r.shape() == Shape{-1, 6});
  CHECK(s.lod_level() == 1);

  Model model(tape.program(loss));
  GradientMachine gm(model, loss);
  const std::vector<size_t> offs{0, 2, 6, 6, 8};  // lengths 2, 4, 0, 2: after conv [8, 3], reshaped [4, 6]
  Tensor xv = random_tensor<double>({8, 2}, -1, 1, 21);
  auto offv = Tensor::from<int64_t>({0, 1, 0, 0}, Shape{4, 1}), lenv = Tensor::from<int64_t>({1, 1, 0, 1}, Shape{4, 1});
  auto feeds = [&](const Tensor& xs) { return FeedMap{{"x", LoDTensor(xs, {offs})}, {"off", offv}, {"len", lenv}}; };
  gm.forward_backward(feeds(xv));
  LoDTensor gx = gm.gradient(x);
  REQUIRE(gx.shape() == Shape{8, 2});
  Evaluator ev(model);
  Tensor xp = xv.clone();
  bool any_nonzero = false;
  for (int64_t i = 0; i < xv.numel(); ++i) {
    const double v = xv.data<double>()[i];
    xp.data<double>()[i] = v + 1e-6;
    const double up = ev.forward(feeds(xp))[0].get(0);
    xp.data<double>()[i] = v - 1e-6;
    const double down = ev.forward(feeds(xp))[0].get(0);
    xp.data<double>()[i] = v;
    const double numeric = (up - down) / 2e-6;
    any_nonzero = any_nonzero || std::abs(numeric) > 1e-6;
    CHECK(gx.data<double>()[i] == doctest::Approx(numeric).epsilon(1e-6));
  }
  CHECK(any_nonzero);
}

TEST_CASE("sequence_shape layers: sequence_reshape refuses new_dim 0 when called") {
  Tape tape;
  auto x = data("x", f32, {-1, 4}).lod_level(1);
  CHECK_THROWS_WITH_AS(sequence_reshape(x, 0), doctest::Contains("sequence_reshape: new_dim must be positive, got 0"), Error);
}
