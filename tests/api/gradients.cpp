// tests/api/gradients.cpp: GradientMachine::gradient of any variable (data inputs against finite differences in
// f64, hidden activations against a hand computation), sparse embedding gradients from gradients(), data
// layers with stop_gradient(false) still fed, and the api objects' Var overloads against their name forms.
#include "pch.hpp"
#include "support/op_check.hpp"

#include <filesystem>
#include <unistd.h>

using namespace oar;
using test::error_of;
namespace fs = std::filesystem;

namespace {

/// x [N, 4] f64 -> h = tanh(fc(x, 5)) -> y = fc(h, 2) -> loss = mean(y).
struct Mlp {
  Var x, h, y, loss;
  explicit Mlp(bool x_gradient = false) {
    auto d = data("x", f64, {-1, 4});
    if (x_gradient) d.stop_gradient(false);
    x = d;
    h = fc(x, 5).act(oar::tanh).name("h");
    y = fc(h, 2).param("w2");
    loss = mean(y);
  }
};

/// ids [N, 1] i64 -> an is_sparse embedding "table" [rows, dim] -> fc(1) "w" without bias -> loss = mean.
struct SparseEmbedding {
  Var ids, loss;
  SparseEmbedding(int64_t rows, int64_t dim) {
    ids = data("ids", i64, {-1, 1});
    Var emb = embedding(ids, {rows, dim}).set("is_sparse", true).param("table");
    loss = mean(fc(emb, 1).param("w").bias(false));
  }
};

/// An Mlp's model and GradientMachine after one forward_backward on x [3, 4] drawn with `seed`.
struct MlpRun {
  Tape tape;
  Mlp n;
  Model model{tape.program(n.loss)};
  GradientMachine gm{model, n.loss};
  Tensor x;
  explicit MlpRun(uint32_t seed) : x(test::random_tensor<double>({3, 4}, -1, 1, seed)) { gm.forward_backward({{"x", x}}); }
};

/// Central finite differences of the model's scalar output `loss` with respect to every element of feed `x`.
std::vector<double> numeric_gradient(const Model& model, const Tensor& x, double delta = 1e-6) {
  Evaluator ev(model);
  std::vector<double> g(size_t(x.numel()));
  Tensor xp = x.clone();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.data<double>()[i];
    xp.data<double>()[i] = v + delta;
    const double up = ev.forward({{"x", xp}})[0].get(0);
    xp.data<double>()[i] = v - delta;
    const double down = ev.forward({{"x", xp}})[0].get(0);
    xp.data<double>()[i] = v;
    g[size_t(i)] = (up - down) / (2 * delta);
  }
  return g;
}


void check_same(const Tensor& a, const Tensor& b) {
  REQUIRE(a.shape() == b.shape());
  REQUIRE(a.dtype() == b.dtype());
  CHECK(std::memcmp(a.raw(), b.raw(), a.bytes()) == 0);
}

}  // namespace

TEST_CASE("api: gm.gradient(x) of a data input matches finite differences in f64, leaving the parameter gradients as they were") {
  MlpRun run(11);
  auto& [tape, n, model, gm, x] = run;
  std::map<std::string, Tensor> before;
  for (auto& [p, g] : gm.gradients()) before[p] = g.dense.clone();
  CHECK(before.size() == 4);
  CHECK(!gm.program().global_block().find_var("x@GRAD"));  // data layers stop gradients: not computed until asked

  LoDTensor gx = gm.gradient(n.x);
  REQUIRE(gx.shape() == Shape{3, 4});
  REQUIRE(gx.dtype() == f64);
  auto numeric = numeric_gradient(model, x);
  for (int64_t i = 0; i < gx.numel(); ++i) CHECK(gx.data<double>()[i] == doctest::Approx(numeric[size_t(i)]).epsilon(1e-7));
  // Asking for x's gradient computed it and changed nothing else.
  auto after = gm.gradients();
  REQUIRE(after.size() == before.size());
  for (auto& [p, g] : before) check_same(g, after.at(p).dense);
  // By name: the same tensor; on the next batch it is computed directly (no second run) and kept.
  check_same(gm.gradient("x"), gx);
  Tensor x2 = test::random_tensor<double>({3, 4}, -1, 1, 12);
  gm.forward_backward({{"x", x2}});
  LoDTensor gx2 = gm.gradient(n.x);
  auto numeric2 = numeric_gradient(model, x2);
  for (int64_t i = 0; i < gx2.numel(); ++i) CHECK(gx2.data<double>()[i] == doctest::Approx(numeric2[size_t(i)]).epsilon(1e-7));
}

TEST_CASE("api: gm.gradient(h) of a hidden activation and of the loss match a hand computation") {
  MlpRun run(13);
  auto& [tape, n, model, gm, x] = run;
  // loss = mean(h W2 + b2) over 3 x 2 elements: dloss/dh[i][j] = (W2[j][0] + W2[j][1]) / 6.
  const Tensor& w2 = model.parameter("w2");
  REQUIRE(w2.shape() == Shape{5, 2});
  LoDTensor gh = gm.gradient(n.h);
  REQUIRE(gh.shape() == Shape{3, 5});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j)
      CHECK(gh.data<double>()[i * 5 + j] == doctest::Approx((w2.data<double>()[j * 2] + w2.data<double>()[j * 2 + 1]) / 6).epsilon(1e-12));
  // dloss/dy = 1/6 everywhere, dloss/dloss = 1.
  LoDTensor gy = gm.gradient(n.y);
  REQUIRE(gy.numel() == 6);
  for (int64_t i = 0; i < 6; ++i) CHECK(gy.data<double>()[i] == doctest::Approx(1.0 / 6));
  CHECK(gm.gradient(n.loss).get(0) == 1.0);
  // Asked-for gradients are kept from buffer recycling: several at once stay readable after the next batch.
  gm.forward_backward({{"x", test::random_tensor<double>({3, 4}, -1, 1, 14)}});
  CHECK(gm.gradient(n.h).get(0) == doctest::Approx((w2.data<double>()[0] + w2.data<double>()[1]) / 6).epsilon(1e-12));
  CHECK(gm.gradient(n.y).get(5) == doctest::Approx(1.0 / 6));
}

TEST_CASE("api: a gradient asked after forward_backward equals one tracked from the start (dropout, batch norm untouched)") {
  Tape tape;
  auto x = data("x", f32, {-1, 6});
  Var h = dropout(fc(x, 8).act(relu), 0.5);
  Var hb = batch_norm(h);
  Var loss = mean(fc(hb, 3));
  Model model(tape.program(loss));
  GradientMachine tracked(model, loss, {}, 77), lazy(model, loss, {}, 77);
  tracked.track_gradient(x);
  tracked.track_gradient(h);
  Tensor xv = test::random_tensor<float>({16, 6}, -1, 1, 5);
  tracked.forward_backward({{"x", xv}});
  lazy.forward_backward({{"x", xv}});
  std::vector<std::pair<std::string, Tensor>> stats;
  for (auto& [name, t] : model.persistables())
    if (name.find("mean") != std::string::npos || name.find("variance") != std::string::npos) stats.push_back({name, t.clone()});
  REQUIRE(stats.size() == 2);
  check_same(lazy.gradient(x), tracked.gradient(x));  // the second run repeats the same dropout mask
  check_same(lazy.gradient(h), tracked.gradient(h));
  for (auto& [p, g] : tracked.gradients()) check_same(lazy.gradients().at(p).dense, g.dense);
  for (auto& [name, t] : stats) CHECK_MESSAGE(std::memcmp(t.raw(), model.parameter(name).raw(), t.bytes()) == 0, name);
}

TEST_CASE("api: a gradient asked of a stop_gradient variable flows no further (append_backward's wanted)") {
  Tape tape;
  auto d = data("x", f64, {-1, 4});
  Var u = fc(d, 6).param("w0").bias(false);
  auto parts = split(u, 2, 1);  // a = u[:, 0:3], b = u[:, 3:6]
  Var loss = mean(fc({parts[0], parts[1]}, 1).params({ParamAttr("wa"), ParamAttr("wb")}).bias(false));
  Model model(tape.program(loss));
  const std::string b = model.name_of(parts[1]), ln = model.name_of(loss);
  // b stops gradients (no_grad_set) but its gradient is wanted; split, which writes b, is on the path through a.
  Program plain = model.program(), wanted = model.program();
  auto pg1 = append_backward(plain, ln, {b});
  auto pg2 = append_backward(wanted, ln, {b}, {b});
  CHECK(pg1.size() == pg2.size());
  Tensor xv = test::random_tensor<double>({2, 4}, -1, 1, 21);
  Executor exe;
  auto r1 = exe.run(plain, model.scope(), {{"x", xv}}, {"w0@GRAD"});
  auto r2 = exe.run(wanted, model.scope(), {{"x", xv}}, {"w0@GRAD", b + "@GRAD"});
  check_same(r1[0], r2[0]);
  // dloss/du = [wa / 2, 0] per row (b passes nothing back): w0@GRAD = x^T [wa / 2, 0], zero in columns 3..5.
  const Tensor &wa = model.parameter("wa"), &wb = model.parameter("wb");
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j) {
      const double want = j < 3 ? (xv.data<double>()[i] + xv.data<double>()[4 + i]) * wa.data<double>()[j] / 2 : 0.0;
      CHECK(r2[0].data<double>()[i * 6 + j] == doctest::Approx(want).epsilon(1e-12));
    }
  // b@GRAD = wb / 2 on each row.
  REQUIRE(r2[1].shape() == Shape{2, 3});
  for (int64_t i = 0; i < 6; ++i) CHECK(r2[1].data<double>()[i] == doctest::Approx(wb.data<double>()[i % 3] / 2).epsilon(1e-12));
}

TEST_CASE("api: the gradient of a .stop_gradient() activation leaves the parameters before it without one") {
  Tape tape;
  auto x = data("x", f64, {-1, 4});
  Var h = fc(x, 3).act(oar::tanh).stop_gradient();
  Var loss = mean(fc(h, 2));
  Model model(tape.program(loss));
  GradientMachine gm(model, loss);
  gm.forward_backward({{"x", test::random_tensor<double>({2, 4}, -1, 1, 22)}});
  auto before = gm.gradients();
  CHECK(before.size() == 2);  // the second fc's weight and bias only
  LoDTensor gh = gm.gradient(h);
  const Tensor& w = model.parameter("fc_1.w_0");
  for (int64_t i = 0; i < 6; ++i) CHECK(gh.data<double>()[i] == doctest::Approx((w.data<double>()[(i % 3) * 2] + w.data<double>()[(i % 3) * 2 + 1]) / 4));
  auto after = gm.gradients();
  REQUIRE(after.size() == 2);
  for (auto& [p, g] : before) check_same(g.dense, after.at(p).dense);
}

TEST_CASE("api: gm.gradient errors name the variable and say why") {
  Tape tape;
  auto x = data("x", f32, {-1, 4});
  auto label = data("label", i64, {-1, 1});
  auto unused = data("unused", f32, {-1, 4});
  Var pred = fc(x, 3).act(softmax);
  Var side = fc(unused, 2);
  Var cost = mean(cross_entropy(pred, label));
  Model model(tape.program({cost, side}));
  Optimizer opt(model, cost, optim::sgd(0.1));
  GradientMachine& gm = opt.machine();
  FeedMap feeds{{"x", test::random_tensor<float>({2, 4})}, {"label", Tensor::from<int64_t>({0, 2}, {2, 1})}, {"unused", test::random_tensor<float>({2, 4})}};
  // Each error names the line that asked.
  auto at = [](int line) { return fmt::format("{}:{} (gradient): gradient of ", __FILE__, line); };
  CHECK(error_of([&] { gm.gradient(x); }) == at(__LINE__) + "'x': run forward_backward first");
  gm.forward_backward(feeds);
  CHECK(error_of([&] { gm.gradient("nope"); }) == at(__LINE__) + "'nope': the model's program has no such variable");
  CHECK(error_of([&] { gm.gradient(label); }) == at(__LINE__) + "'label': only floating-point variables have a gradient, and 'label' is i64");
  std::string msg = error_of([&] { gm.gradient(unused); }), want = at(__LINE__);
  CHECK(msg == want + "'unused': the loss '" + model.name_of(cost) +
            "' does not depend on it through differentiable variables (it does not reach the loss, or only through integer variables or variables "
            "with stop_gradient), so it has no gradient");
  // After an update the batch cannot be run again for a gradient the machine did not compute.
  opt.step(feeds);
  msg = error_of([&] { gm.gradient(x); }), want = at(__LINE__);
  CHECK(msg == want + "'x': the last forward_backward did not compute it and the parameters have been updated since, so that pass cannot be "
                       "repeated; ask for it before the update, or call track_gradient(\"x\") before forward_backward");
  // Tracked, it comes with every step, and the optimizer keeps updating through the machine's new scope.
  gm.track_gradient(x);
  Tensor w0 = model.parameter("fc_0.w_0").clone();
  opt.step(feeds);
  CHECK(gm.gradient(x).shape() == Shape{2, 4});
  auto g = gm.gradients().at("fc_0.w_0").dense;
  for (int64_t i = 0; i < w0.numel(); ++i) CHECK(model.parameter("fc_0.w_0").data<float>()[i] == doctest::Approx(w0.data<float>()[i] - 0.1f * g.data<float>()[i]));
}

TEST_CASE("api: a data layer with stop_gradient(false) is still a feed, and its gradient is computed without asking") {
  Tape tape;
  Mlp n(/*x_gradient=*/true);
  Model model(tape.program(n.loss));
  CHECK(model.feeds() == std::vector<std::string>{"x"});
  Evaluator ev(model);
  Tensor x = test::random_tensor<double>({3, 4}, -1, 1, 15);
  auto out = ev.forward(io::Batch{x});  // fed through the model's feed list
  REQUIRE(out.size() == 1);
  GradientMachine gm(model, n.loss);
  CHECK(gm.program().global_block().find_var("x@GRAD"));
  gm.forward_backward({{"x", x}});
  CHECK(gm.forward_backward({{"x", x}})[0].get(0) == out[0].get(0));
  const Scope* scope = &gm.scope();
  LoDTensor gx = gm.gradient("x");
  CHECK(&gm.scope() == scope);  // nothing prepared again
  auto numeric = numeric_gradient(model, x);
  for (int64_t i = 0; i < gx.numel(); ++i) CHECK(gx.data<double>()[i] == doctest::Approx(numeric[size_t(i)]).epsilon(1e-7));
  Model infer(tape.program(n.y));
  CHECK(infer.feeds() == std::vector<std::string>{"x"});
}

TEST_CASE("api: gradients() hands out an is_sparse embedding's gradient as rows and values") {
  Tape tape;
  Var loss = SparseEmbedding(6, 3).loss;
  Model model(tape.program(loss));
  GradientMachine gm(model, loss);
  FeedMap feeds{{"ids", Tensor::from<int64_t>({4, 1, 4}, {3, 1})}};
  gm.forward_backward(feeds);
  auto grads = gm.gradients();
  REQUIRE(grads.size() == 2);
  const Gradient& g = grads.at("table");
  const Tensor& w = model.parameter("w");  // [3, 1]
  // loss = mean over 3 rows of emb[i] . w: dloss/demb[i] = w / 3 for each looked-up id, in order.
  REQUIRE(g.sparse);
  CHECK(g.rows == std::vector<int64_t>{4, 1, 4});
  CHECK(g.height == 6);
  REQUIRE(g.values.shape() == Shape{3, 3});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 3; ++j) CHECK(g.values.data<float>()[i * 3 + j] == doctest::Approx(w.data<float>()[j] / 3));
  CHECK(!grads.at("w").sparse);
  // Dense: row 4 twice, row 1 once, the rest zero; gradient(table) gives the same.
  Tensor d = g.to_dense();
  REQUIRE(d.shape() == Shape{6, 3});
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t j = 0; j < 3; ++j) CHECK(d.data<float>()[r * 3 + j] == doctest::Approx(w.data<float>()[j] / 3 * (r == 4 ? 2 : r == 1 ? 1 : 0)));
  check_same(gm.gradient("table"), d);
  // The sparse gradients drive an update: only the looked-up rows move.
  Tensor t0 = model.parameter("table").clone();
  Optimizer opt(model, loss, optim::sgd(0.5));
  opt.update(grads);
  const Tensor& t1 = model.parameter("table");
  for (int64_t i = 0; i < 18; ++i) CHECK(t1.data<float>()[i] == doctest::Approx(t0.data<float>()[i] - 0.5f * d.data<float>()[i]));
}

TEST_CASE("api: an is_sparse embedding over LoD ids gives the dense gradient's rows through a sequence model") {
  // ids of 3 sequences (lengths 3, 0, 2) -> embedding -> sequence_pool (sum) -> fc: the sparse gradient's
  // rows are the looked-up ids in order, and scattered they equal the dense table's gradient.
  const LoD lod{{0, 3, 3, 5}};
  FeedMap feeds{{"ids", LoDTensor(Tensor::from<int64_t>({2, 5, 2, 0, 5}, {5, 1}), lod)}};
  std::map<bool, Tensor> table_grad;
  for (bool sparse : {false, true}) {
    Tape tape;
    auto ids = data("ids", i64, {-1, 1}).lod_level(1);
    Var emb = embedding(ids, {6, 3}).sparse(sparse).param("table");
    Var loss = mean(fc(sequence_pool(emb, SequencePoolType::sum), 1).param("w").bias(false));
    Model model(tape.program(loss));
    model.parameter("table").copy_from(test::random_tensor<float>({6, 3}, -1, 1, 31));
    model.parameter("w").copy_from(test::random_tensor<float>({3, 1}, -1, 1, 32));
    GradientMachine gm(model, loss);
    gm.forward_backward(feeds);
    const Gradient g = gm.gradients().at("table");
    CHECK(g.sparse == sparse);
    if (sparse) CHECK(g.rows == std::vector<int64_t>{2, 5, 2, 0, 5});
    table_grad[sparse] = g.to_dense();
  }
  REQUIRE(table_grad[true].shape() == Shape{6, 3});
  test::check_close(table_grad[true], table_grad[false], 1e-6, 1e-6, "sparse vs dense table gradient");
  // Rows 2 and 5 are looked up twice, row 0 once; the others never.
  for (int64_t r : {0, 2, 5}) CHECK(table_grad[true].get(r * 3) != 0.0);
  for (int64_t r : {1, 3, 4}) CHECK(table_grad[true].get(r * 3) == 0.0);
}

TEST_CASE("api: the concurrent optimizer sums sparse embedding gradients of its machines") {
  Tape tape;
  SparseEmbedding net(5, 2);
  Model model(tape.program(net.loss));
  Optimizer opt(model, net.loss, optim::sgd(1.0), 2);
  Tensor t0 = model.parameter("table").clone(), w = model.parameter("w").clone();
  auto reader = io::Reader::from_tensors({Tensor::from<int64_t>({0, 3, 3, 1}, {4, 1})}).batch(2);  // two batches, one update
  opt.train(reader, {net.ids}, 1);
  CHECK(opt.step_count() == 1);
  // Each batch of 2 gives w / 2 per looked-up id; both batches' rows add up: id 3 twice, 0 and 1 once.
  const Tensor& t1 = model.parameter("table");
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t j = 0; j < 2; ++j) {
      const double times = r == 3 ? 2 : (r == 0 || r == 1) ? 1 : 0;
      CHECK(t1.data<float>()[r * 2 + j] == doctest::Approx(t0.data<float>()[r * 2 + j] - times * w.data<float>()[j] / 2));
    }
}

TEST_CASE("api: every Var overload of Model, Evaluator, GradientMachine and Optimizer gives what the name gives") {
  Tape tape;
  auto x = data("x", f32, {-1, 4});
  auto label = data("label", i64, {-1, 1});
  Var h = fc(x, 6).act(relu);
  Var pred = fc(h, 3).act(softmax).name("pred");
  Var cost = mean(cross_entropy(pred, label));
  Var acc = accuracy(pred, label);
  Model model(tape.program({cost, acc}));
  const std::string xn = model.name_of(x), hn = model.name_of(h), cn = model.name_of(cost), an = model.name_of(acc);
  CHECK(model.names_of({x, h, pred}) == std::vector<std::string>{"x", hn, "pred"});
  Tensor xv = test::random_tensor<float>({5, 4}, -1, 1, 3), lv = Tensor::from<int64_t>({0, 1, 2, 1, 0}, {5, 1});
  FeedMap feeds{{"x", xv}, {"label", lv}};
  io::Batch batch{xv, lv};

  SUBCASE("GradientMachine") {
    GradientMachine by_name(model, cn, {an}), by_var(model, cost, {acc});
    CHECK(by_var.loss() == by_name.loss());
    CHECK(by_var.fetch_names() == by_name.fetch_names());
    GradientMachine plain(model, cost);  // the loss alone
    CHECK(plain.fetch_names() == std::vector<std::string>{cn});
    auto a = by_name.forward_backward(feeds), b = by_var.forward_backward(feeds);
    REQUIRE(a.size() == 2);
    check_same(a[0], b[0]);
    check_same(a[1], b[1]);
    for (auto& [p, g] : by_name.gradients()) check_same(g.dense, by_var.gradients().at(p).dense);
    check_same(by_var.gradient(h), by_name.gradient(hn));
    by_name.keep(std::vector<std::string>{hn});
    by_var.keep(std::vector<Var>{h});
    by_name.forward_backward(feeds);
    by_var.forward_backward(feeds);
    check_same(by_var.scope().tensor(hn), by_name.scope().tensor(hn));  // kept: still holds its value
    by_var.track_gradient(pred);
    by_name.track_gradient("pred");
    check_same(by_var.forward_backward(feeds)[0], by_name.forward_backward(feeds)[0]);
    check_same(by_var.gradient(pred), by_name.gradient("pred"));
  }
  SUBCASE("Evaluator") {
    Evaluator by_name(model, {"pred", hn}), by_var(model, {pred, h}), by_vec(model, std::vector<Var>{pred, h});
    CHECK(by_var.fetch_names() == by_name.fetch_names());
    CHECK(by_vec.fetch_names() == by_name.fetch_names());
    Evaluator outputs(model, {}, {.fuse = true});  // an empty list is still the model's outputs
    CHECK(outputs.fetch_names() == std::vector<std::string>{cn, an});
    auto a = by_name.forward(batch, {"x", "label"}), b = by_var.forward(batch, std::vector<Var>{x, label});
    check_same(a[0], b[0]);
    check_same(a[1], b[1]);
    check_same(by_var.activation(h), by_name.activation(hn));
    CHECK(&by_var.activation(pred) == &by_var.activation("pred"));
    auto fa = by_name.to_feeds(batch, {"x", "label"}), fb = by_var.to_feeds(batch, std::vector<Var>{x, label});
    REQUIRE(fb.size() == 2);
    for (auto& [k, t] : fa) CHECK(fb.at(k).raw() == t.raw());
    auto reader = [&] { return io::Reader::from_tensors({xv, lv}).batch(5); };
    Evaluator ev(model);
    MetricSet s1, s2;
    s1.add(std::make_shared<ConfusionMatrix>());
    s2.add(std::make_shared<ConfusionMatrix>());
    auto ta = ev.test(reader(), &s1, "pred", {"x", "label"});
    auto tb = ev.test(reader(), &s2, pred, {x, label});
    CHECK(ta == tb);
    CHECK(ta.count(cn) == 1);
    CHECK(ta.count("accuracy") == 1);  // the metric's
  }
  SUBCASE("Model::save_inference") {
    fs::path dir = fs::temp_directory_path() / ("oar_test_gradients_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    model.save_inference(dir / "names", {"x"}, {"pred"});
    model.save_inference(dir / "vars", {x}, {pred});
    model.save_inference(dir / "vector", std::vector<Var>{x}, std::vector<Var>{pred}, /*combined=*/false);
    model.save_inference(dir / "defaults", {}, {}, false);
    Model a = Model::load_inference(dir / "names"), b = Model::load_inference(dir / "vars"), c = Model::load_inference(dir / "vector");
    CHECK(b.feeds() == a.feeds());
    CHECK(b.outputs() == a.outputs());
    CHECK(c.outputs() == a.outputs());
    CHECK(Model::load_inference(dir / "defaults").outputs() == std::vector<std::string>{cn, an});
    Evaluator ea(a), eb(b), ec(c);
    auto ra = ea.forward({{"x", xv}}), rb = eb.forward({{"x", xv}}), rc = ec.forward({{"x", xv}});
    check_same(ra[0], rb[0]);
    check_same(ra[0], rc[0]);
    fs::remove_all(dir);
  }
  SUBCASE("Optimizer") {
    std::map<std::string, Tensor> start;
    for (auto& p : model.parameter_names()) start[p] = model.parameter(p).clone();
    std::vector<Tensor> w;
    for (int k = 0; k < 2; ++k) {
      // Both start from the same values: a pass by name and a pass by Var move them the same way.
      for (auto& [p, t] : start) model.parameter(p).copy_from(t);
      auto r = io::Reader::from_tensors({xv, lv}).batch(5);
      if (k == 0) {
        Optimizer opt(model, cn, optim::sgd(0.1));
        opt.train(r, {"x", "label"}, 1);  // two literals: names, not an iterator pair
      } else {
        Optimizer opt(model, cost, optim::sgd(0.1));
        opt.train(r, {x, label}, 1);
      }
      w.push_back(model.parameter("fc_0.w_0").clone());
    }
    check_same(w[0], w[1]);
    CHECK(std::memcmp(w[0].raw(), start.at("fc_0.w_0").raw(), w[0].bytes()) != 0);
  }
}
