// tests/api/training.cpp: Model / Evaluator / GradientMachine / Optimizer end to end: training reaches a loss
// bound, save/load and inference models are bit-identical, evaluators run in parallel bit for bit,
// checkpoints resume exactly, the concurrent optimizer is deterministic, and bad input gives clear errors.
#include "pch.hpp"
#include "support/heap.hpp"
#include "support/op_check.hpp"
#include "support/temp_dir.hpp"

#include <csignal>
#include <filesystem>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace oar;
namespace fs = std::filesystem;

namespace {

/// A synthetic 3-class problem: x [n, 8], label = argmax of a fixed linear map of x.
io::Reader toy_data(int64_t n, uint64_t seed = 3) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> x(static_cast<size_t>(n * 8));
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (auto& v : x) v = d(rng);
  for (int64_t i = 0; i < n; ++i) {
    float s[3] = {0, 0, 0};
    for (int j = 0; j < 8; ++j) {
      s[0] += x[size_t(i * 8 + j)] * float(j % 3 == 0);
      s[1] += x[size_t(i * 8 + j)] * float(j % 3 == 1);
      s[2] += x[size_t(i * 8 + j)] * float(j % 3 == 2) * 0.9f;
    }
    y[size_t(i)] = std::max_element(s, s + 3) - s;
  }
  return io::Reader::from_tensors({Tensor::from<float>(x, {n, 8}), Tensor::from<int64_t>(y, {n, 1})});
}

struct Net {
  Var x, label, pred, cost, acc;
  Net(bool with_dropout = false) {
    x = data("x", f32, {-1, 8});
    label = data("label", i64, {-1, 1});
    Var h = fc(x, 16).act(relu);
    if (with_dropout) h = dropout(h, 0.2);
    pred = fc(h, 3).act(softmax).name("pred");
    cost = mean(cross_entropy(pred, label));
    acc = accuracy(pred, label);
  }
};

std::vector<double> losses_of(Optimizer& opt, io::Reader& r, const Net& n, int epochs) {
  std::vector<double> out;
  opt.train(r, {n.x, n.label}, epochs, [&](const Event& e) {
    if (e.kind == Event::Kind::end_iteration) out.push_back(e.loss);
  });
  return out;
}

}  // namespace

TEST_CASE("api: training a small MLP lowers the loss and reaches a high accuracy on toy data") {
  Tape tape;
  Net n;
  Model model(tape.program({n.cost, n.acc}));
  Optimizer opt(model, n.cost, optim::adam(0.01));
  auto train = toy_data(2048).shuffle(512, 1).batch(64);
  auto losses = losses_of(opt, train, n, 5);
  REQUIRE(losses.size() == 5 * 32);
  CHECK(losses.back() < 0.5 * losses.front());
  Evaluator ev(model);
  auto m = ev.test(toy_data(512, 99).batch(128));
  CHECK(m.at(model.name_of(n.acc)) > 0.85);
}

TEST_CASE("api: a 200-step Fashion-MNIST MLP run reaches a loss bound") {
  if (!fs::exists(io::fashion_mnist_dir() / "train-images-idx3-ubyte.gz")) {
    MESSAGE("Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist): skipped");
    return;
  }
  Tape tape;
  auto img = data("img", f32, {-1, 784});
  auto label = data("label", i64, {-1, 1});
  auto pred = fc(fc(img, 200).act(relu), 10).act(softmax);
  auto cost = mean(cross_entropy(pred, label));
  Model model(tape.program(cost));
  Optimizer opt(model, cost, optim::adam(1e-3));
  auto train = io::fashion_mnist_train().shuffle(10000, 5).batch(64).take(200);
  std::vector<double> losses;
  opt.train(train, {img, label}, 1, [&](const Event& e) {
    if (e.kind == Event::Kind::end_iteration) losses.push_back(e.loss);
  });
  REQUIRE(losses.size() == 200);
  double last = 0;
  for (size_t i = 180; i < 200; ++i) last += losses[i] / 20;
  CHECK(losses.front() > 1.5);  // about ln(10) at the start
  CHECK(last < 0.75);
}

TEST_CASE("api: save/load and inference models give bit-identical outputs") {
  Tape tape;
  Net n;
  Model model(tape.program({n.cost, n.acc}));
  Optimizer opt(model, n.cost, optim::sgd(0.1));
  auto train = toy_data(256).batch(32);
  losses_of(opt, train, n, 1);
  fs::path dir = test::fresh_dir("training", "save");
  Model infer(tape.program(n.pred));
  infer.save(dir / "model");
  Model loaded = Model::load(dir / "model");
  infer.save_inference(dir / "inference");
  Model inf2 = Model::load_inference(dir / "inference");
  infer.save_inference(dir / "inference_files", {}, {}, /*combined=*/false);
  Model inf3 = Model::load_inference(dir / "inference_files");
  CHECK(inf2.feeds() == std::vector<std::string>{"x"});  // the label is not needed for the prediction
  auto batch = *toy_data(64, 7).batch(64).next();
  Evaluator a(infer), b(loaded), c(inf2), d(inf3);
  auto ra = a.forward({{"x", batch[0]}}), rb = b.forward({{"x", batch[0]}}), rc = c.forward({{"x", batch[0]}}), rd = d.forward({{"x", batch[0]}});
  REQUIRE(ra[0].numel() == 64 * 3);
  for (int64_t i = 0; i < ra[0].numel(); ++i) {
    CHECK(ra[0].data<float>()[i] == rb[0].data<float>()[i]);
    CHECK(ra[0].data<float>()[i] == rc[0].data<float>()[i]);
    CHECK(ra[0].data<float>()[i] == rd[0].data<float>()[i]);
  }
  CHECK_THROWS_AS(Model::load(dir / "missing"), Error);
  fs::remove_all(dir);
}

/// The book's conv net, small: conv-pool, batch norm, conv-pool, fc softmax; images [n, 1, 12, 12].
struct ConvNet {
  Var img, label, pred, cost;
  ConvNet() {
    img = data("img", f32, {-1, 1, 12, 12});
    label = data("label", i64, {-1, 1});
    auto conv_pool = [](const Var& x, int64_t filters) { return pool2d(conv2d(x, filters, 3).act(relu), 2); };
    Var h = batch_norm(conv_pool(img, 8));
    pred = fc(conv_pool(h, 8), 3).act(softmax).name("pred");
    cost = mean(cross_entropy(pred, label));
  }
};

io::Reader toy_images(int64_t n, uint64_t seed = 5) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> x(static_cast<size_t>(n * 144));
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    y[size_t(i)] = int64_t(i % 3);
    for (int64_t j = 0; j < 144; ++j) x[size_t(i * 144 + j)] = d(rng) + (j % 3 == y[size_t(i)] ? 1.f : 0.f);
  }
  return io::Reader::from_tensors({Tensor::from<float>(x, {n, 1, 12, 12}), Tensor::from<int64_t>(y, {n, 1})});
}

/// Runs 8 evaluators of `model` in parallel threads, each over every batch 5 times, and checks every output
/// against a single-threaded run bit for bit.
void check_parallel_evaluators(const Model& model, const std::string& feed, const std::vector<io::Batch>& batches) {
  std::vector<Tensor> expected;
  {
    Evaluator ev(model);
    for (auto& b : batches) expected.push_back(ev.forward({{feed, b[0]}})[0].clone());
  }
  std::vector<std::vector<Tensor>> got(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      Evaluator ev(model);
      for (int rep = 0; rep < 5; ++rep)
        for (size_t i = 0; i < batches.size(); ++i) {
          size_t k = (i + size_t(t)) % batches.size();
          auto out = ev.forward({{feed, batches[k][0]}})[0].clone();
          if (rep == 0) got[size_t(t)].push_back(out);
          else if (std::memcmp(out.raw(), got[size_t(t)][i].raw(), out.bytes()) != 0) got[size_t(t)][i] = Tensor();
        }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t)
    for (size_t i = 0; i < batches.size(); ++i) {
      size_t k = (i + size_t(t)) % batches.size();
      REQUIRE(got[size_t(t)][i].initialized());
      CHECK(std::memcmp(got[size_t(t)][i].raw(), expected[k].raw(), expected[k].bytes()) == 0);
    }
}

TEST_CASE("api: 8 evaluators of a conv net with batch norm run in parallel, bit for bit, and never write its statistics") {
  Tape tape;
  ConvNet n;
  Model model(tape.program({n.cost}));
  Optimizer opt(model, n.cost, optim::momentum(0.05, 0.9));
  auto train = toy_images(96).batch(32);
  opt.train(train, {n.img, n.label}, 1);  // moves the running statistics away from their initial values
  Model infer(tape.program(n.pred));
  std::vector<std::pair<std::string, Tensor>> stats;
  for (auto& [name, t] : infer.persistables()) stats.push_back({name, t.clone()});
  std::vector<io::Batch> batches;
  for (auto& b : toy_images(8 * 16, 9).batch(16)) batches.push_back(b);
  check_parallel_evaluators(infer, "img", batches);
  for (auto& [name, t] : stats) CHECK_MESSAGE(std::memcmp(t.raw(), infer.parameter(name).raw(), t.bytes()) == 0, name);
}

TEST_CASE("api: a training step allocates nothing on the heap once its shapes repeat (MLP and conv net)") {
  auto steady_allocations = [](Optimizer& opt, const FeedMap& feeds) {
    std::vector<LoDTensor> out;
    for (int i = 0; i < 3; ++i) opt.step(feeds, out);  // first runs size every buffer
    const int64_t before = oar_test::heap_allocations.load();
    const char* trap = std::getenv("OAR_TEST_HEAP_TRAP");
    oar_test::heap_trap = trap && *trap == '1';
    for (int i = 0; i < 5; ++i) opt.step(feeds, out);
    oar_test::heap_trap = false;
    return oar_test::heap_allocations.load() - before;
  };
  SUBCASE("MLP, Adam") {
    Tape tape;
    Net n;
    Model model(tape.program({n.cost}));
    Optimizer opt(model, n.cost, optim::adam(1e-3));
    auto b = *toy_data(64).batch(64).begin();
    CHECK(steady_allocations(opt, {{"x", b[0]}, {"label", b[1]}}) == 0);
  }
  SUBCASE("conv net with batch norm, momentum") {
    Tape tape;
    ConvNet n;
    Model model(tape.program({n.cost}));
    Optimizer opt(model, n.cost, optim::momentum(0.05, 0.9));
    auto b = *toy_images(32).batch(32).begin();
    CHECK(steady_allocations(opt, {{"img", b[0]}, {"label", b[1]}}) == 0);
  }
}

TEST_CASE("api: on the CPU step_async, forward_backward_async, forward_async and run_async have run when they return, with the synchronous calls' values") {
  // in_flight 0: Optimizer::step; otherwise step_async with up to `in_flight` steps queued before the oldest
  // values are read (on a GPU the loop that keeps the device busy; tests/cuda/model.cpp runs it there).
  auto train = [](int in_flight) {
    Tape tape;
    Net n;
    Model model(tape.program({n.cost, n.acc}), 5);
    Optimizer opt(model, n.cost, optim::adam(0.01));
    std::vector<double> losses, accs;
    std::vector<PendingFetch> queued;
    auto read = [&](std::vector<LoDTensor>& v) {
      REQUIRE(v.size() == 2);
      losses.push_back(v[0].get(0));
      accs.push_back(v[1].get(0));
    };
    for (auto& b : toy_data(512).batch(64)) {
      FeedMap f{{model.name_of(n.x), b[0]}, {model.name_of(n.label), b[1]}};
      if (in_flight == 0) {
        std::vector<LoDTensor> v = opt.step(f);
        read(v);
        continue;
      }
      queued.push_back(opt.step_async(f));
      CHECK(queued.back().ready());
      if (int(queued.size()) > in_flight) {
        read(queued.front().wait());
        queued.erase(queued.begin());
      }
    }
    for (auto& q : queued) read(q.wait());
    return std::pair{losses, accs};
  };
  const auto stepped = train(0);
  REQUIRE(stepped.first.size() == 8);
  CHECK(stepped.first.back() < stepped.first.front());
  CHECK(train(1) == stepped);
  CHECK(train(3) == stepped);

  Tape tape;
  Net n;
  Model model(tape.program({n.cost}), 5);
  auto b = *toy_data(32).batch(32).next();
  FeedMap feeds{{model.name_of(n.x), b[0]}, {model.name_of(n.label), b[1]}};
  GradientMachine gm(model, model.name_of(n.cost));
  const double loss = gm.forward_backward(feeds).at(0).get(0);
  const Tensor g = gm.gradient("fc_0.w_0").clone();
  PendingFetch p = gm.forward_backward_async(feeds);
  CHECK(p.ready());
  CHECK(p.wait().at(0).get(0) == loss);
  const Tensor g2 = gm.gradient("fc_0.w_0");
  CHECK(std::memcmp(g.raw(), g2.raw(), g.bytes()) == 0);

  Evaluator ev(model);
  const LoDTensor sync = ev.forward(feeds).at(0);
  PendingFetch e = ev.forward_async(feeds);
  CHECK(e.ready());
  CHECK(e.wait().at(0).get(0) == sync.get(0));

  Executor exe;
  Scope scope;
  Tape t2;
  auto x = data("x", f32, {-1, 3});
  Var y = x * 2.0 + 1.0;
  const Topology topo = t2.program(y);
  auto prepared = exe.prepare(topo.main, scope);
  PendingFetch q = exe.run_async(*prepared, scope, {{topo.name_of(x), LoDTensor(Tensor::from<float>({1, 2, 3}, {1, 3}))}}, {topo.name_of(y)});
  CHECK(q.ready());
  CHECK(q.wait().at(0).get(2) == 7.0);
  CHECK(PendingFetch().ready());
  CHECK(PendingFetch().wait().empty());
}

TEST_CASE("api: 8 evaluators in parallel threads match a single-threaded run bit for bit") {
  Tape tape;
  Net n;
  Model model(tape.program(n.pred));
  std::vector<io::Batch> batches;
  auto r = toy_data(8 * 50, 11).batch(50);
  for (auto& b : r) batches.push_back(b);
  check_parallel_evaluators(model, "x", batches);
}

TEST_CASE("api: GradientMachine gradients drive Optimizer::update like step()") {
  Tape tape;
  Net n;
  Model m1(tape.program({n.cost}), 5);
  auto batch = *toy_data(32).batch(32).next();
  FeedMap feeds{{"x", batch[0]}, {"label", batch[1]}};
  GradientMachine gm(m1, m1.name_of(n.cost));
  gm.forward_backward(feeds);
  auto grads = gm.gradients();
  CHECK(grads.size() == 4);
  Tensor w0 = m1.parameter("fc_0.w_0").clone();
  Optimizer opt(m1, n.cost, optim::sgd(0.5));
  opt.update(grads);
  const Tensor& w1 = m1.parameter("fc_0.w_0");
  REQUIRE(!grads.at("fc_0.w_0").sparse);
  const Tensor& g = grads.at("fc_0.w_0").dense;
  for (int64_t i = 0; i < w1.numel(); ++i) CHECK(w1.data<float>()[i] == doctest::Approx(w0.data<float>()[i] - 0.5f * g.data<float>()[i]));
}

TEST_CASE("api: a checkpoint resumes exactly (same loss curve as an uninterrupted run)") {
  fs::path dir = test::fresh_dir("training", "ckpt");
  std::vector<double> full, resumed;
  {
    Tape tape;
    Net n(/*with_dropout=*/true);
    Model model(tape.program({n.cost, n.acc}), 7);
    Optimizer opt(model, n.cost, optim::adam(0.01).with_schedule(optim::exponential_decay(10, 0.9)));
    auto train = toy_data(512).shuffle(128, 3).batch(32);
    full = losses_of(opt, train, n, 3);
  }
  {
    Tape tape;
    Net n(true);
    Model model(tape.program({n.cost, n.acc}), 7);
    Optimizer opt(model, n.cost, optim::adam(0.01).with_schedule(optim::exponential_decay(10, 0.9)));
    auto train = toy_data(512).shuffle(128, 3).batch(32);
    int seen = 0;
    try {
      opt.train(train, {n.x, n.label}, 3, [&](const Event& e) {
        if (e.kind != Event::Kind::end_iteration) return;
        resumed.push_back(e.loss);
        if (++seen == 21) {  // mid-epoch 2
          opt.checkpoint(dir / "a.ckpt");
          throw std::runtime_error("simulated crash");
        }
      });
    } catch (const std::runtime_error&) {
    }
  }
  {
    Tape tape;
    Net n(true);
    Model model(tape.program({n.cost, n.acc}), 999);  // other initial values: all overwritten by resume
    Optimizer opt(model, n.cost, optim::adam(0.01).with_schedule(optim::exponential_decay(10, 0.9)));
    auto train = toy_data(512).shuffle(128, 3).batch(32);
    opt.resume(dir / "a.ckpt", &train);
    auto rest = losses_of(opt, train, n, 3);
    resumed.insert(resumed.end(), rest.begin(), rest.end());
  }
  REQUIRE(resumed.size() == full.size());
  for (size_t i = 0; i < full.size(); ++i) CHECK(resumed[i] == full[i]);
  fs::remove_all(dir);
}

TEST_CASE("api: the concurrent optimizer is deterministic for a fixed seed and thread count") {
  auto run = [] {
    Tape tape;
    Net n;
    Model model(tape.program({n.cost, n.acc}), 3);
    Optimizer opt(model, n.cost, optim::momentum(0.05), 2);
    auto train = toy_data(512).shuffle(128, 4).batch(32);
    auto losses = losses_of(opt, train, n, 2);
    return std::make_pair(losses, model.parameter("fc_0.w_0").clone());
  };
  auto [l1, w1] = run();
  auto [l2, w2] = run();
  CHECK(l1.size() == 2 * 8);  // 16 batches per epoch, two per update
  CHECK(l1 == l2);
  CHECK(std::memcmp(w1.raw(), w2.raw(), w1.bytes()) == 0);
  CHECK(l1.back() < l1.front());
}

TEST_CASE("api: a kill during a checkpoint save leaves the previous checkpoint loadable") {
  fs::path dir = test::fresh_dir("training", "kill");
  Tape tape;
  auto x = data("x", f32, {-1, 512});
  auto y = mean(fc(x, 2048));
  Model model(tape.program(y));
  Optimizer opt(model, y, optim::adam(0.01));
  opt.checkpoint(dir / "c.ckpt");
  auto size = fs::file_size(dir / "c.ckpt");
  CHECK(size > 4 * 512 * 2048);
  for (int attempt = 0; attempt < 3; ++attempt) {
    pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      for (;;) opt.checkpoint(dir / "c.ckpt");  // the child saves until it is killed
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(30 + 40 * attempt));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    io::Checkpoint c = io::load_checkpoint(dir / "c.ckpt");
    CHECK(c.tensors.size() == model.persistables().size());
  }
  // A truncated or corrupted file is an error, never a crash.
  std::string bytes = detail::read_file(dir / "c.ckpt");
  detail::write_file_atomic(dir / "t.ckpt", bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_AS(io::load_checkpoint(dir / "t.ckpt"), Error);
  bytes[bytes.size() / 2] ^= 0x5a;
  detail::write_file_atomic(dir / "x.ckpt", bytes);
  CHECK_THROWS_WITH_AS(io::load_checkpoint(dir / "x.ckpt"), doctest::Contains("corrupted"), Error);
  fs::remove_all(dir);
}

TEST_CASE("api: bad labels and mismatched feeds give clear errors") {
  Tape tape;
  Net n;
  Model model(tape.program({n.cost}));
  Optimizer opt(model, n.cost, optim::sgd(0.1));
  auto x = test::random_tensor<float>({4, 8});
  std::string msg;
  try {
    opt.step({{"x", x}, {"label", Tensor::from<int64_t>({0, 1, 7, 2}, {4, 1})}});
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("7") != std::string::npos);
  CHECK(msg.find("training.cpp") != std::string::npos);  // the cross_entropy layer's line
  try {
    opt.step({{"x", test::random_tensor<float>({4, 9})}, {"label", Tensor::from<int64_t>({0, 1, 1, 2}, {4, 1})}});
  } catch (const Error& e) {
    msg = e.what();
  }
  CHECK(msg.find("feed 'x': expected f32 [?, 8], got f32 [4, 9]") != std::string::npos);
  CHECK_THROWS_WITH_AS(opt.step({{"x", x}}), doctest::Contains("missing feed 'label'"), Error);
}

TEST_CASE("api: metrics accumulate over batches (accuracy, precision/recall/F1, confusion, AUC)") {
  ConfusionMatrix cm;
  auto scores = Tensor::from<float>({0.9f, 0.1f, 0.2f, 0.8f, 0.6f, 0.4f, 0.3f, 0.7f}, {4, 2});
  cm.update(scores, Tensor::from<int64_t>({0, 1, 1, 1}, {4, 1}));
  auto m = cm.eval();
  CHECK(m["accuracy"] == doctest::Approx(0.75));
  CHECK(m["precision_0"] == doctest::Approx(0.5));  // predicted 0 twice, right once
  CHECK(m["recall_0"] == doctest::Approx(1.0));
  CHECK(m["recall_1"] == doctest::Approx(2.0 / 3));
  CHECK(m["f1_1"] == doctest::Approx(0.8));
  CHECK(cm.matrix()[1][0] == 1);
  Auc auc;
  auc.update(scores, Tensor::from<int64_t>({0, 1, 0, 1}, {4, 1}));
  CHECK(auc.eval()["auc"] == doctest::Approx(1.0));  // class-1 scores 0.8, 0.7 above 0.1, 0.4
  auc.reset();
  auc.update(scores, Tensor::from<int64_t>({1, 0, 1, 0}, {4, 1}));
  CHECK(auc.eval()["auc"] == doctest::Approx(0.0));
}
