// tests/layers/options.cpp: the typed layer options (`oar::conv2d(x, 16, {3, 5}).stride({1, 2})`): each reaches
// the op attribute it names, they chain with Var's setters either way round, rectangular conv2d and pool2d
// compute what a plain loop does, and the string form `.set("key", v)` still works and reports wrong types.
#include "pch.hpp"
#include "support/op_check.hpp"

#include <cmath>
#include <limits>

using namespace oar;

namespace {

/// The one op of `type` in the main block.
const Operator& only_op(const Program& p, const std::string& type) {
  const Operator* found = nullptr;
  for (auto* op : p.global_block().ops())
    if (op->type() == type) {
      REQUIRE_MESSAGE(found == nullptr, "two ", type, " ops");
      found = op;
    }
  REQUIRE_MESSAGE(found != nullptr, "no ", type, " op");
  return *found;
}
using Ints = std::vector<int32_t>;

/// The error replaying what `build` records on a fresh tape (after a data "x" f32 [?, 3, 8, 8]) gives.
template <class F>
std::string replay_error(F build) {
  Tape tape;
  auto x = data("x", f32, {-1, 3, 8, 8});
  Var v = build(x);
  try {
    tape.program(v);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("options: data, fc and embedding options reach the variable and op attributes they name") {
  Tape tape;
  auto words = data("words", i64, {-1, 1}).lod_level(2);
  auto x = data("x", f32, {-1, 2, 3});
  auto h = fc(x, 4).flatten_dims(2);
  auto e = embedding(words, {10, 3}).sparse().padding_idx(-2).dtype(f64).name("e");
  Topology t = tape.program({h, e});
  CHECK(t.main.global_block().var("words").lod_level() == 2);
  const Operator& mul = only_op(t.main, "mul");
  CHECK(mul.attr<int32_t>("x_num_col_dims") == 2);
  CHECK(t.main.global_block().var(t.outputs[0]).shape() == Shape{-1, 2, 4});
  const Operator& lookup = only_op(t.main, "lookup_table");
  CHECK(lookup.attr<bool>("is_sparse"));
  CHECK(lookup.attr<int64_t>("padding_idx") == 8);  // -2 counts from vocab 10
  CHECK(t.main.global_block().var("e.w_0").shape() == Shape{10, 3});
  CHECK(t.main.global_block().var("e.w_0").dtype() == f64);
  CHECK(t.main.global_block().var("e").dtype() == f64);

  // Without the options: the defaults.
  Tape t2;
  auto w2 = data("words", i64, {-1, 1});
  auto e2 = embedding(w2, {10, 3});
  Topology d = t2.program(e2);
  CHECK(d.main.global_block().var("words").lod_level() == 0);
  CHECK_FALSE(only_op(d.main, "lookup_table").attr<bool>("is_sparse"));
  CHECK(only_op(d.main, "lookup_table").attr<int64_t>("padding_idx") == -1);
  CHECK_THROWS_WITH_AS(embedding(w2, {10, 0}), doctest::Contains("embedding: the table shape {vocab, dim} must be positive, got {10, 0}"), Error);
}

TEST_CASE("options: conv2d's window options take n or {h, w} and reach strides, paddings, dilations, groups") {
  Tape tape;
  auto x = data("x", f32, {-1, 4, 9, 12});
  auto c = conv2d(x, 6, {3, 5}).stride({1, 2}).padding({1, 0}).dilation({2, 1}).groups(2).name("c");
  auto sq = conv2d(x, 2, 3).stride(2).padding(1).dilation(1);
  Topology t = tape.program({c, sq});
  std::vector<const Operator*> convs;
  for (auto* op : t.main.global_block().ops())
    if (op->type() == "conv2d") convs.push_back(op);
  REQUIRE(convs.size() == 2);
  const Operator& r = *convs[0];
  CHECK(r.attr<Ints>("strides") == Ints{1, 2});
  CHECK(r.attr<Ints>("paddings") == Ints{1, 0});
  CHECK(r.attr<Ints>("dilations") == Ints{2, 1});
  CHECK(r.attr<int32_t>("groups") == 2);
  // Filter [F, C / g, kh, kw]; H' = (9 + 2 - (2 * 2 + 1)) / 1 + 1 = 7, W' = (12 - 5) / 2 + 1 = 4.
  CHECK(t.main.global_block().var("c.w_0").shape() == Shape{6, 2, 3, 5});
  CHECK(t.main.global_block().var("c").shape() == Shape{-1, 6, 7, 4});
  // He-style init over the filter's kh * kw * C inputs.
  bool found = false;
  for (auto* op : t.startup.global_block().ops())
    if (op->type() == "gaussian_random" && op->output("Out")[0] == "c.w_0") {
      found = true;
      CHECK(op->attr<float>("std") == doctest::Approx(std::sqrt(2.0 / (3 * 5 * 4))));
    }
  CHECK(found);
  const Operator& s = *convs[1];
  CHECK(s.attr<Ints>("strides") == Ints{2, 2});
  CHECK(s.attr<Ints>("paddings") == Ints{1, 1});
  CHECK(s.attr<Ints>("dilations") == Ints{1, 1});
  CHECK(s.attr<int32_t>("groups") == 1);
  CHECK(t.main.global_block().var(s.output("Output")[0]).shape() == Shape{-1, 2, 5, 6});
}

TEST_CASE("options: conv2d_transpose takes conv2d's options and output_size") {
  Tape tape;
  auto x = data("x", f32, {-1, 3, 4, 5});
  auto y = conv2d_transpose(x, 2, {3, 2}).stride(2).padding({1, 0}).output_size({8, 11}).bias(false).name("y");
  Topology t = tape.program(y);
  const Operator& op = only_op(t.main, "conv2d_transpose");
  CHECK(op.attr<Ints>("strides") == Ints{2, 2});
  CHECK(op.attr<Ints>("paddings") == Ints{1, 0});
  CHECK(op.attr<Ints>("output_size") == Ints{8, 11});
  CHECK(t.main.global_block().var("y.w_0").shape() == Shape{3, 2, 3, 2});
  // Smallest sizes: (4 - 1) 2 - 2 + 2 + 1 = 7 and (5 - 1) 2 + 1 + 1 = 10; output_size picks 8 and 11.
  CHECK(t.main.global_block().var("y").shape() == Shape{-1, 2, 8, 11});
}

TEST_CASE("options: pool2d, batch_norm, layer_norm, dropout and cross_entropy options reach their op attributes") {
  Tape tape;
  auto x = data("x", f32, {-1, 3, 6, 7});
  auto p = pool2d(x, {2, 3}).type(PoolType::avg).stride({1, 2}).padding({1, 0}).global().ceil_mode().exclusive(false);
  auto b = batch_norm(x).momentum(0.5).epsilon(1e-3).is_test();
  auto l = layer_norm(x).begin_norm_axis(2).epsilon(1e-4).name("l");
  auto d = dropout(x, 0.25).is_test().seed(7).upscale_in_train();
  auto probs = data("probs", f32, {-1, 4});
  auto ce = cross_entropy(probs, probs).soft_label();
  Topology t = tape.program({p, b, l, d, ce});

  const Operator& pool = only_op(t.main, "pool2d");
  CHECK(pool.attr<std::string>("pooling_type") == "avg");
  CHECK(pool.attr<Ints>("ksize") == Ints{2, 3});
  CHECK(pool.attr<Ints>("strides") == Ints{1, 2});
  CHECK(pool.attr<Ints>("paddings") == Ints{1, 0});
  CHECK(pool.attr<bool>("global_pooling"));
  CHECK(pool.attr<bool>("ceil_mode"));
  CHECK_FALSE(pool.attr<bool>("exclusive"));

  const Operator& bn = only_op(t.main, "batch_norm");
  CHECK(bn.attr<float>("momentum") == 0.5f);
  CHECK(bn.attr<float>("epsilon") == 1e-3f);
  CHECK(bn.attr<bool>("is_test"));

  const Operator& ln = only_op(t.main, "layer_norm");
  CHECK(ln.attr<int32_t>("begin_norm_axis") == 2);
  CHECK(ln.attr<float>("epsilon") == 1e-4f);
  CHECK(t.main.global_block().var("l.w_0").shape() == Shape{6 * 7});

  const Operator& drop = only_op(t.main, "dropout");
  CHECK(drop.attr<float>("dropout_prob") == 0.25f);
  CHECK(drop.attr<bool>("is_test"));
  CHECK(drop.attr<bool>("fix_seed"));
  CHECK(drop.attr<int32_t>("seed") == 7);
  CHECK(drop.attr<std::string>("dropout_implementation") == "upscale_in_train");

  CHECK(only_op(t.main, "cross_entropy").attr<bool>("soft_label"));

  // The positional pool type, and the defaults of the others.
  Tape t2;
  auto x2 = data("x", f32, {-1, 3, 6, 7});
  auto p2 = pool2d(x2, 2, PoolType::avg);
  auto d2 = dropout(x2, 0.5);
  auto b2 = batch_norm(x2);
  Topology u = t2.program({p2, d2, b2});
  CHECK(only_op(u.main, "pool2d").attr<std::string>("pooling_type") == "avg");
  CHECK(only_op(u.main, "pool2d").attr<Ints>("strides") == Ints{2, 2});  // the window
  CHECK_FALSE(only_op(u.main, "dropout").attr<bool>("fix_seed"));
  CHECK(only_op(u.main, "dropout").attr<std::string>("dropout_implementation") == "downgrade_in_infer");
  CHECK(only_op(u.main, "batch_norm").attr<float>("momentum") == 0.9f);
  CHECK_FALSE(only_op(u.main, "batch_norm").attr<bool>("is_test"));
}

TEST_CASE("options: typed options chain before and after Var's setters and keep the layer's type") {
  Tape tape;
  auto x = data("x", f32, {-1, 3, 8, 8});
  static_assert(std::is_same_v<decltype(conv2d(x, 4, 3).act(relu)), Conv2dLayer&>);
  static_assert(std::is_same_v<decltype(conv2d(x, 4, 3).act(relu).padding(1)), Conv2dLayer&>);
  static_assert(std::is_same_v<decltype(pool2d(x, 2).name("p").stride(1)), Pool2dLayer&>);
  static_assert(std::is_same_v<decltype(fc(x, 2).bias(false).flatten_dims(1)), FcLayer&>);
  auto c = conv2d(x, 4, 3).act(relu).padding(1).name("c").stride(2).bias(false);
  auto h = fc(c, 5).param(ParamAttr("w")).flatten_dims(1).act(oar::tanh);
  Var e = c * 2.0 + 1.0;  // a layer's typed result is an expression operand
  Topology t = tape.program({h, e});
  const Operator& conv = only_op(t.main, "conv2d");
  CHECK(conv.attr<Ints>("paddings") == Ints{1, 1});
  CHECK(conv.attr<Ints>("strides") == Ints{2, 2});
  CHECK(conv.output("Output")[0] != "c");  // relu's output is the layer's, named c
  CHECK(only_op(t.main, "relu").output("Out")[0] == "c");
  CHECK(t.main.global_block().var("c").shape() == Shape{-1, 4, 4, 4});
  CHECK(t.main.global_block().var("w").shape() == Shape{4 * 4 * 4, 5});
  CHECK(only_op(t.main, "tanh").input("X").size() == 1);
  CHECK(only_op(t.main, "fused_elementwise").input("X") == std::vector<std::string>{"c"});
}

TEST_CASE("options: a rectangular f64 conv2d (3x2 filter, stride {1, 2}, padding {1, 0}) against a plain loop") {
  Tape tape;
  auto x = data("x", f64, {-1, 3, 5, 6});
  auto y = conv2d(x, 4, {3, 2}).stride({1, 2}).padding({1, 0}).param(ParamAttr("w")).bias(ParamAttr("b").with_initializer(Uniform(-1, 1)));
  Topology t = tape.program(y);
  const int64_t N = 2, C = 3, H = 5, W = 6, F = 4, kh = 3, kw = 2, s0 = 1, s1 = 2, p0 = 1, p1 = 0;
  const int64_t Ho = (H + 2 * p0 - kh) / s0 + 1, Wo = (W + 2 * p1 - kw) / s1 + 1;
  REQUIRE(Ho == 5);
  REQUIRE(Wo == 3);
  CHECK(t.main.global_block().var("w").shape() == Shape{F, C, kh, kw});
  CHECK(t.main.global_block().var(t.outputs[0]).shape() == Shape{-1, F, Ho, Wo});

  Scope scope;
  Executor exe;
  exe.run(t.startup, scope);
  const Tensor w = scope.find("w")->tensor(), b = scope.find("b")->tensor();
  auto xv = test::random_tensor<double>({N, C, H, W}, -1, 1, 11);
  auto out = exe.run(t.main, scope, {{"x", xv}}, {t.outputs[0]});
  REQUIRE(out[0].shape() == Shape{N, F, Ho, Wo});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < F; ++m)
      for (int64_t i = 0; i < Ho; ++i)
        for (int64_t j = 0; j < Wo; ++j) {
          double acc = b.get(m);
          for (int64_t c = 0; c < C; ++c)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t bb = 0; bb < kw; ++bb) {
                int64_t r = i * s0 - p0 + a, q = j * s1 - p1 + bb;
                if (r < 0 || r >= H || q < 0 || q >= W) continue;
                acc += xv.get(((n * C + c) * H + r) * W + q) * w.get(((m * C + c) * kh + a) * kw + bb);
              }
          CHECK(out[0].get(((n * F + m) * Ho + i) * Wo + j) == doctest::Approx(acc).epsilon(1e-12));
        }
}

TEST_CASE("options: rectangular pool2d windows ({2, 3}: max with the default stride, avg with stride and padding) against a plain loop") {
  const int64_t N = 1, C = 2, H = 4, W = 7;
  Tape tape;
  auto x = data("x", f64, {-1, C, H, W});
  auto mx = pool2d(x, {2, 3});
  auto av = pool2d(x, {2, 3}).type(PoolType::avg).stride({1, 2}).padding({1, 0});
  auto av_all = pool2d(x, {2, 3}).type(PoolType::avg).stride({1, 2}).padding({1, 0}).exclusive(false);
  Topology t = tape.program({mx, av, av_all});
  Scope scope;
  Executor exe;
  auto xv = test::random_tensor<double>({N, C, H, W}, -1, 1, 5);
  auto out = exe.run(t.main, scope, {{"x", xv}}, t.outputs);

  // Window h in [i s0 - p0, i s0 - p0 + kh) ∩ [0, H), w likewise.
  auto reference = [&](bool avg, bool exclusive, int64_t s0, int64_t s1, int64_t p0, int64_t p1, const Tensor& got) {
    const int64_t kh = 2, kw = 3, Ho = (H + 2 * p0 - kh) / s0 + 1, Wo = (W + 2 * p1 - kw) / s1 + 1;
    REQUIRE(got.shape() == Shape{N, C, Ho, Wo});
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < Ho; ++i)
        for (int64_t j = 0; j < Wo; ++j) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int count = 0;
          for (int64_t r = i * s0 - p0; r < i * s0 - p0 + kh; ++r)
            for (int64_t q = j * s1 - p1; q < j * s1 - p1 + kw; ++q) {
              if (r < 0 || r >= H || q < 0 || q >= W) continue;
              double v = xv.get((c * H + r) * W + q);
              best = std::max(best, v);
              sum += v;
              ++count;
            }
          double expect = !avg ? best : sum / double(exclusive ? count : kh * kw);
          CHECK(got.get((c * Ho + i) * Wo + j) == doctest::Approx(expect).epsilon(1e-12));
        }
  };
  reference(false, true, 2, 3, 0, 0, out[0]);  // [1, 2, 2, 2]
  reference(true, true, 1, 2, 1, 0, out[1]);   // [1, 2, 5, 3]
  reference(true, false, 1, 2, 1, 0, out[2]);
  CHECK(t.main.global_block().var(t.outputs[0]).shape() == Shape{-1, C, 2, 2});
  CHECK(t.main.global_block().var(t.outputs[1]).shape() == Shape{-1, C, 5, 3});
}

// The deprecated spelling is what this case is about: its warning is tests/compile_fail/deprecated_pool2d.cpp's.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST_CASE("options: the deprecated pool2d(x, k, \"max\" / \"avg\") computes what pool2d(x, k, PoolType) does") {
  Tape tape;
  auto x = data("x", f64, {-1, 2, 4, 6});
  auto old_max = pool2d(x, 2, "max");
  auto old_avg = pool2d(x, 2, "avg").stride(1);  // still the typed result: options chain on it
  auto new_max = pool2d(x, 2, PoolType::max);
  auto new_avg = pool2d(x, 2, PoolType::avg).stride(1);
  Topology t = tape.program({old_max, old_avg, new_max, new_avg});
  Scope scope;
  Executor exe;
  auto out = exe.run(t.main, scope, {{"x", test::random_tensor<double>({3, 2, 4, 6}, -1, 1, 9)}}, t.outputs);
  CHECK(out[0].shape() == Shape{3, 2, 2, 3});
  CHECK(out[0].to_vector<double>() == out[2].to_vector<double>());
  CHECK(out[1].shape() == Shape{3, 2, 3, 5});
  CHECK(out[1].to_vector<double>() == out[3].to_vector<double>());

  std::string e = "(no error)";
  try {
    pool2d(x, 2, "mean");
  } catch (const Error& err) {
    e = err.what();
  }
  CHECK_MESSAGE(e.find("\"mean\" is neither \"max\" nor \"avg\"") != std::string::npos, e);
  CHECK_MESSAGE(e.find("options.cpp") != std::string::npos, e);
}
#pragma GCC diagnostic pop

TEST_CASE("options: the string form .set(key, value) still works, for layer options and op attributes") {
  Tape tape;
  auto x = data("x", f32, {-1, 3, 8, 8}).set("lod_level", 1);
  auto c = conv2d(x, 4, 3).set("stride", 2).set("padding", 1).set("groups", 1).set("use_cudnn", false);
  auto r = conv2d(x, 4, {3, 1}).set("padding", std::vector<int32_t>{1, 0});
  auto p = pool2d(x, 2).set("pool_stride", 1).set("pool_padding", std::vector<int32_t>{0, 1}).set("pooling_type", "avg");
  auto b = batch_norm(x).set("momentum", 0.5).set("is_test", true);
  auto h = fc(x, 3).set("num_flatten_dims", 1);
  Topology t = tape.program({c, r, p, b, h});
  CHECK(t.main.global_block().var("x").lod_level() == 1);
  std::vector<const Operator*> convs;
  for (auto* op : t.main.global_block().ops())
    if (op->type() == "conv2d") convs.push_back(op);
  REQUIRE(convs.size() == 2);
  CHECK(convs[0]->attr<Ints>("strides") == Ints{2, 2});
  CHECK(convs[0]->attr<Ints>("paddings") == Ints{1, 1});
  CHECK_FALSE(convs[0]->attr<bool>("use_cudnn"));
  CHECK(convs[1]->attr<Ints>("paddings") == Ints{1, 0});
  CHECK(t.main.global_block().var(convs[1]->output("Output")[0]).shape() == Shape{-1, 4, 8, 8});
  const Operator& pool = only_op(t.main, "pool2d");
  CHECK(pool.attr<Ints>("strides") == Ints{1, 1});
  CHECK(pool.attr<Ints>("paddings") == Ints{0, 1});
  CHECK(pool.attr<std::string>("pooling_type") == "avg");
  CHECK(only_op(t.main, "batch_norm").attr<float>("momentum") == 0.5f);
  CHECK(only_op(t.main, "batch_norm").attr<bool>("is_test"));
  CHECK(only_op(t.main, "mul").attr<int32_t>("x_num_col_dims") == 1);
}

TEST_CASE("options: a string-form option of the wrong type says what it must be, then what it got") {
  // attr_as, under every typed read of an attribute.
  std::string m;
  try {
    attr_as<int32_t>(Attribute(std::vector<int32_t>{1, 2}), "padding");
  } catch (const Error& e) {
    m = e.what();
  }
  CHECK(m == "attribute 'padding' must be int, got ints [1, 2]");
  CHECK_THROWS_WITH_AS(attr_as<std::string>(Attribute(1.5f), "pooling_type"), "attribute 'pooling_type' must be string, got float 1.5", Error);

  int line = __LINE__ + 1;
  std::string m1 = replay_error([](const Var& x) { return fc(x, 4).set("num_flatten_dims", std::vector<int32_t>{1, 2}); });
  CHECK(m1.find("options.cpp:" + std::to_string(line)) != std::string::npos);
  CHECK(m1.find("fc: option 'num_flatten_dims': attribute 'num_flatten_dims' must be int, got ints [1, 2]") != std::string::npos);
  // A two-int option takes an int or two ints.
  std::string m2 = replay_error([](const Var& x) { return conv2d(x, 4, 3).set("padding", "same"); });
  CHECK(m2.find("conv2d: option 'padding' must be an int or two ints, got string \"same\"") != std::string::npos);
  std::string m3 = replay_error([](const Var& x) { return conv2d(x, 4, 3).set("stride", std::vector<int32_t>{1, 2, 3}); });
  CHECK(m3.find("conv2d: option 'stride' must be an int or two ints, got ints [1, 2, 3]") != std::string::npos);
  // An option the layer does not take, by name (a typed setter cannot be misspelt: tests/compile_fail/).
  std::string m4 = replay_error([](const Var& x) { return conv2d(x, 4, 3).set("paddin", 1); });
  CHECK(m4.find("conv2d does not take the option 'paddin'") != std::string::npos);
  CHECK(replay_error([](const Var& x) { return conv2d(x, 4, 3).padding(1); }) == "(no error)");
}
