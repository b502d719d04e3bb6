// tests/cuda/model.cpp: the user's view on a GPU: a Model, Optimizer and Evaluator on cuda:0 train as they do
// on the CPU (same initial weights, the same losses to f32 rounding, the same accuracy), a checkpoint moves
// between the two places either way, a recurrent group (the executor's recurrent op) trains as on the CPU, and
// running out of device memory is an oar::Error naming the op and the user's line. Each case skips, saying so,
// without a device.
#include <doctest/doctest.h>

#include <oar/oar.hpp>
#include <oar/ops/scale.hpp>

#include "support/toy.hpp"

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>

using namespace oar;
namespace fs = std::filesystem;

namespace {

bool no_device() {
  if (cuda_device_count() > 0) return false;
  MESSAGE("no CUDA device: skipped");
  return true;
}

struct Net {
  Var x, label, pred, cost, acc;
  Net() {
    x = data("x", f32, {-1, 8});
    label = data("label", i64, {-1, 1});
    Var h = dropout(fc(x, 32).act(relu), 0.1);  // the counter-based masks are the same on both places
    pred = fc(h, 3).act(softmax);
    cost = mean(cross_entropy(pred, label));
    acc = accuracy(pred, label);
  }
};

std::vector<double> train(Optimizer& opt, const Net& n, int epochs, uint64_t shuffle_seed = 5) {
  auto r = test::toy_classes(1024, 1).shuffle(256, shuffle_seed).batch(64);
  std::vector<double> losses;
  opt.train(r, {n.x, n.label}, epochs, [&](const Event& e) {
    if (e.kind == Event::Kind::end_iteration) losses.push_back(e.loss);
  });
  return losses;
}

void check_losses_close(const std::vector<double>& cpu_l, const std::vector<double>& gpu_l) {
  REQUIRE(cpu_l.size() == gpu_l.size());
  for (size_t i = 0; i < cpu_l.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(gpu_l[i] - cpu_l[i]) <= 1e-3 * std::max(1.0, std::abs(cpu_l[i])));
  }
}

/// An MLP 8-32-3 on cuda:0 (initial weights from seed 7) and its training on the toy classes in batches of 64.
struct ToyMlp {
  Tape tape;
  Var x = data("x", f32, {-1, 8}), label = data("label", i64, {-1, 1});
  Var cost = mean(cross_entropy(fc(fc(x, 32).act(relu), 3).act(softmax), label));
  Model model{tape.program({cost}), cuda(0), 7};
  /// `epochs` over 1024 examples: the loss of every step.
  std::vector<double> train(Optimizer& opt, int epochs) {
    auto r = test::toy_classes(1024, 1).shuffle(256, 5).batch(64);
    std::vector<double> losses;
    opt.train(r, {x, label}, epochs, [&](const Event& e) {
      if (e.kind == Event::Kind::end_iteration) losses.push_back(e.loss);
    });
    return losses;
  }
};

/// Two programs over persistables a, b, c of 4M floats (a = 0 at first), each prepared on an executor of its
/// own on `place`: `slow` adds 1 to a 200 times (a <-> b, ending in a), `quick` copies a to c.
/// set_cuda_graphs(on) for its lifetime, off again however the case ends (the switch is process-wide: a case
/// that failed with graphs on would otherwise run every later case with them).
struct GraphsSwitch {
  explicit GraphsSwitch(bool on) { set_cuda_graphs(on); }
  ~GraphsSwitch() { set_cuda_graphs(false); }
  GraphsSwitch(const GraphsSwitch&) = delete;
  GraphsSwitch& operator=(const GraphsSwitch&) = delete;
};

struct SlowQuick {
  static constexpr int64_t n = int64_t(1) << 22;
  static constexpr int adds = 200;
  Scope scope;
  Program slow, quick;
  Executor e1, e2;
  std::shared_ptr<PreparedBlock> p1, p2;
  explicit SlowQuick(Place place) : e1(place), e2(place) {
    for (Program* p : {&slow, &quick})
      for (const char* v : {"a", "b", "c"}) p->global_block().create_var(v, {.dtype = f32, .shape = Shape{n}, .persistable = true});
    auto add_scale = [](Program& p, const std::string& x, const std::string& out, float bias) {
      Operator op{std::string(ops::Scale::type)};
      op.set_input(ops::Scale::x, {x}).set_output(ops::Scale::out, {out}).set_attr(ops::Scale::scale, 1.0f).set_attr(ops::Scale::bias, bias);
      add_op(p.global_block(), std::move(op));
    };
    for (int k = 0; k < adds; ++k) add_scale(slow, k % 2 ? "b" : "a", k % 2 ? "a" : "b", 1.0f);
    add_scale(quick, "a", "c", 0.0f);
    Tensor zeros(Shape{n}, f32, cpu());
    std::memset(zeros.raw(), 0, zeros.bytes());
    scope.var("a").tensor() = LoDTensor(zeros.to(place, true));
    p1 = e1.prepare(slow, scope);
    p2 = e2.prepare(quick, scope);
  }
};

/// `check` on a SlowQuick on the CPU (the arithmetic), then on cuda:0 when there is one.
template <class F>
void on_cpu_then_cuda(F&& check) {
  for (Place place : {cpu(), cuda(0)}) {
    if (place.is_cuda() && no_device()) return;
    CAPTURE(place.str());
    SlowQuick sq(place);
    check(sq);
  }
}

}  // namespace

TEST_CASE("cuda: a model trains on cuda:0 as on the CPU: same initial weights, the same losses, the same accuracy") {
  if (no_device()) return;
  std::vector<double> per_place[2];
  double accuracy[2] = {0, 0};
  const Place places[2] = {cpu(), cuda(0)};
  for (int p = 0; p < 2; ++p) {
    Tape tape;
    Net n;
    Model model(tape.program({n.cost, n.acc}), places[p], 7);
    CHECK(model.place() == places[p]);
    Optimizer opt(model, n.cost, optim::adam(0.01).with_schedule(optim::cosine_decay(80)));
    per_place[p] = train(opt, n, 5);
    Evaluator ev(model);
    accuracy[p] = ev.test(test::toy_classes(512, 99).batch(128)).at(model.name_of(n.acc));
  }
  check_losses_close(per_place[0], per_place[1]);
  CHECK(per_place[1].back() < 0.5 * per_place[1].front());
  CHECK(accuracy[1] > 0.85);
  CHECK(std::abs(accuracy[1] - accuracy[0]) <= 0.01);
}

TEST_CASE("cuda: an f64 model trains on cuda:0 as on the CPU (its updates read the learning rate cast to f64)") {
  if (no_device()) return;
  std::vector<double> per_place[2];
  const Place places[2] = {cpu(), cuda(0)};
  for (int p = 0; p < 2; ++p) {
    Tape tape;
    auto x = data("x", f64, {-1, 8});
    auto y = data("y", f64, {-1, 1});
    Var cost = mean(square_error_cost(fc(fc(x, 16).act(oar::tanh), 1), y));
    Model model(tape.program({cost}), places[p], 7);
    Optimizer opt(model, cost, optim::adam(0.01).with_schedule(optim::cosine_decay(40)));
    std::vector<double> xs(256 * 8), ys(256);
    std::mt19937_64 rng(3);
    std::normal_distribution<double> d;
    for (auto& v : xs) v = d(rng);
    for (size_t i = 0; i < ys.size(); ++i) ys[i] = std::sin(xs[i * 8]) + 0.5 * xs[i * 8 + 1];
    auto r = io::Reader::from_tensors({Tensor::from<double>(xs, {256, 8}), Tensor::from<double>(ys, {256, 1})}).batch(32);
    opt.train(r, {x, y}, 5, [&](const Event& e) {
      if (e.kind == Event::Kind::end_iteration) per_place[p].push_back(e.loss);
    });
  }
  REQUIRE(per_place[0].size() == 40);
  REQUIRE(per_place[1].size() == 40);
  for (size_t i = 0; i < 40; ++i) CHECK(per_place[1][i] == doctest::Approx(per_place[0][i]).epsilon(1e-7));
  CHECK(per_place[1].back() < 0.5 * per_place[1].front());
}

TEST_CASE("cuda: a model with Var expressions (fused_elementwise and its gradient) trains on cuda:0 as on the CPU") {
  if (no_device()) return;
  std::vector<double> per_place[2];
  const Place places[2] = {cpu(), cuda(0)};
  for (int p = 0; p < 2; ++p) {
    Tape tape;
    auto x = data("x", f32, {-1, 8});
    auto label = data("label", i64, {-1, 1});
    Var a = fc(x, 16), b = fc(x, 16);
    Var h = oar::relu(a * b + 0.5 * a - b / 4);  // one fused_elementwise op, x0 and x1 each read twice
    auto cost = mean(cross_entropy(fc(h, 3).act(softmax), label));
    Model model(tape.program({cost}), places[p], 11);
    Optimizer opt(model, cost, optim::adam(0.01));
    auto r = test::toy_classes(1024, 1).shuffle(256, 5).batch(64);
    opt.train(r, {x, label}, 2, [&](const Event& e) {
      if (e.kind == Event::Kind::end_iteration) per_place[p].push_back(e.loss);
    });
  }
  REQUIRE(per_place[0].size() == 32);
  check_losses_close(per_place[0], per_place[1]);
  CHECK(per_place[1].back() < per_place[1].front());
}

TEST_CASE("cuda: a checkpoint written on cuda:0 resumes on the CPU, and one from the CPU resumes on cuda:0") {
  if (no_device()) return;
  const fs::path dir = fs::temp_directory_path() / "oar_cuda_ckpt";
  fs::create_directories(dir);
  for (const bool from_gpu : {true, false}) {
    CAPTURE(from_gpu);
    const Place first = from_gpu ? cuda(0) : cpu(), second = from_gpu ? cpu() : cuda(0);
    std::vector<double> straight, resumed;
    std::vector<std::pair<std::string, Tensor>> saved;
    {
      Tape tape;
      Net n;
      Model model(tape.program({n.cost, n.acc}), first, 3);
      Optimizer opt(model, n.cost, optim::adam(0.01));
      train(opt, n, 2);
      opt.checkpoint(dir / "c.ckpt");
      for (const std::string& name : model.parameter_names()) saved.emplace_back(name, model.parameter(name).to(cpu(), /*copy=*/true));
      straight = train(opt, n, 1, 9);  // the third epoch (train() trains one more pass)
    }
    {
      Tape tape;
      Net n;
      Model model(tape.program({n.cost, n.acc}), second, 1234);  // other initial values: resume overwrites them
      Optimizer opt(model, n.cost, optim::adam(0.01));
      opt.resume(dir / "c.ckpt");
      for (auto& [name, want] : saved) {
        CAPTURE(name);
        const Tensor got = model.parameter(name).to(cpu());
        REQUIRE(got.bytes() == want.bytes());
        CHECK(std::memcmp(got.raw(), want.raw(), want.bytes()) == 0);  // moved exactly
      }
      resumed = train(opt, n, 1, 9);
    }
    REQUIRE(straight.size() == 16);
    check_losses_close(straight, resumed);
  }
  fs::remove_all(dir);
}

TEST_CASE("cuda: a model too large for the device is an oar::Error naming the op and the user's line, and the device stays usable") {
  if (no_device()) return;
  {
    Tape tape;
    auto x = data("x", f32, {-1, 1 << 20});
    auto y = fc(x, 1 << 20);  // 4 TiB of weights: no GPU holds them
    CHECK_THROWS_WITH_AS(Model(tape.program(y), cuda(0)), doctest::Contains("out of memory on cuda:0"), Error);
    try {
      Model m(tape.program(y), cuda(0));
    } catch (const Error& e) {
      const std::string what = e.what();
      CHECK_MESSAGE(what.find("model.cpp") != std::string::npos, what);   // the line of the fc above
      CHECK_MESSAGE(what.find("random") != std::string::npos, what);      // its initializer op
    }
  }
  Tape tape;
  Net n;
  Model model(tape.program({n.cost, n.acc}), cuda(0));
  Optimizer opt(model, n.cost, optim::adam(0.01));
  CHECK(train(opt, n, 1).size() == 16);
}

TEST_CASE("cuda: an Optimizer on cuda:0 with threads > 1 is an oar::Error saying to train with one thread") {
  Tape tape;
  Net n;
  Model cpu_model(tape.program({n.cost, n.acc}), cpu(), 3);
  CHECK(Optimizer(cpu_model, n.cost, optim::sgd(0.1), 2).step_count() == 0);  // the CPU takes threads
  if (no_device()) return;
  Model model(tape.program({n.cost, n.acc}), cuda(0), 3);
  CHECK_THROWS_WITH_AS(Optimizer(model, n.cost, optim::sgd(0.1), 2), doctest::Contains("trains with one thread"), Error);
}

TEST_CASE("cuda: an inference model saved from cuda:0 loads on the CPU and predicts the same") {
  if (no_device()) return;
  const fs::path dir = fs::temp_directory_path() / "oar_cuda_inference";
  Tape tape;
  Net n;
  Model model(tape.program({n.cost, n.acc}), cuda(0), 5);
  Optimizer opt(model, n.cost, optim::adam(0.01));
  train(opt, n, 1);
  Model infer(tape.program(n.pred), cuda(0));  // shares the trained weights
  infer.save_inference(dir);
  Model loaded = Model::load_inference(dir, cpu());
  auto batch = *test::toy_classes(64, 42).batch(64).next();
  auto a = Evaluator(infer).forward({{model.name_of(n.x), batch[0]}});
  auto b = Evaluator(loaded).forward({{model.name_of(n.x), batch[0]}});
  REQUIRE(a.size() == 1);
  REQUIRE(a[0].numel() == b[0].numel());
  for (int64_t i = 0; i < a[0].numel(); ++i) CHECK(std::abs(a[0].get(i) - b[0].get(i)) <= 1e-5);
  fs::remove_all(dir);
}

TEST_CASE("cuda: pin_memory holds the same values in page-locked memory; a pinned reader trains as an unpinned one") {
  const Tensor t = Tensor::from<float>({1.5f, -2.f, 3.25f, 0.f, 7.f, -1.f}, {2, 3});
  const Tensor p = t.pin_memory();
  REQUIRE(p.place().is_cpu());
  REQUIRE(p.shape() == t.shape());
  CHECK(std::memcmp(p.raw(), t.raw(), t.bytes()) == 0);
  CHECK_FALSE(t.pinned());
  auto batch = *test::toy_classes(64, 3).batch(64).pin_memory().next();
  if (cuda_device_count() == 0) {
    CHECK_FALSE(p.pinned());  // no device: a plain copy, and the reader passes batches through
    CHECK_FALSE(batch[0].pinned());
    MESSAGE("no CUDA device: pinned memory not exercised");
    return;
  }
  CHECK(p.pinned());
  CHECK(p.pin_memory().raw() == p.raw());  // already pinned: shared, not copied
  CHECK(batch[0].pinned());
  CHECK(batch[1].pinned());
  const Tensor back = p.to(cuda(0)).to(cpu());
  CHECK(std::memcmp(back.raw(), t.raw(), t.bytes()) == 0);
  std::vector<double> losses[2];
  for (int pinned = 0; pinned < 2; ++pinned) {
    Tape tape;
    Net n;
    Model model(tape.program({n.cost, n.acc}), cuda(0), 7);
    Optimizer opt(model, n.cost, optim::adam(0.01));
    auto r = test::toy_classes(1024, 1).shuffle(256, 5).batch(64);
    if (pinned) r = r.pin_memory().prefetch(2);
    opt.train(r, {n.x, n.label}, 2, [&](const Event& e) {
      if (e.kind == Event::Kind::end_iteration) losses[pinned].push_back(e.loss);
    });
  }
  REQUIRE(losses[0].size() == 32);
  CHECK(losses[0] == losses[1]);  // the same bytes reach the device either way
}

TEST_CASE("cuda: runs of two executors on one device follow each other in the host's order, with nothing copied in between") {
  // `slow` adds 1 to a 4M-element tensor 200 times (a <-> b); `quick`, on another executor (its own stream),
  // reads a at once. Only the device order makes quick see a after slow's last op: had the streams run side by
  // side, c would hold a partial count. The CPU half checks the arithmetic.
  constexpr int64_t n = SlowQuick::n;
  constexpr int adds = SlowQuick::adds;
  on_cpu_then_cuda([&](SlowQuick& sq) {
    auto& [scope, slow, quick, e1, e2, p1, p2] = sq;
    for (int round = 1; round <= 3; ++round) {
      e1.run(*p1, scope, {}, {});
      e2.run(*p2, scope, {}, {});
      const Tensor c = scope.find("c")->tensor().to(cpu());
      CHECK(c.get(0) == double(adds * round));
      CHECK(c.get(n - 1) == double(adds * round));
    }
  });
}

TEST_CASE("cuda: a host feed after a device feed of the same variable is copied into storage of the executor's, not the caller's") {
  if (no_device()) return;
  Program prog;
  Block& b = prog.global_block();
  b.create_var("x", {.dtype = f32, .shape = Shape{4}});
  b.create_var("y", {.dtype = f32, .shape = Shape{4}});
  Operator op{std::string(ops::Scale::type)};
  op.set_input(ops::Scale::x, {"x"}).set_output(ops::Scale::out, {"y"}).set_attr(ops::Scale::scale, 2.0f);
  add_op(b, std::move(op));
  Scope scope;
  Executor exe(cuda(0));
  auto prepared = exe.prepare(prog, scope);
  const Tensor mine = Tensor::from<float>({1, 2, 3, 4}, {4}).to(cuda(0));  // the caller's device tensor, fed as it is
  std::vector<LoDTensor> out;
  exe.run(*prepared, scope, {{"x", LoDTensor(mine)}}, {"y"}, out);
  CHECK(out[0].get(3) == 8.0);
  exe.run(*prepared, scope, {{"x", LoDTensor(Tensor::from<float>({10, 20, 30, 40}, {4}))}}, {"y"}, out);  // a host feed: copied in
  CHECK(out[0].get(3) == 80.0);
  const Tensor back = mine.to(cpu());
  CHECK(back.get(0) == 1.0);  // the caller's tensor was not overwritten
  CHECK(back.get(3) == 4.0);
}

TEST_CASE("cuda: feeds already on the device, or pinned and copied without waiting, train as host feeds do") {
  if (no_device()) return;
  auto losses_with = [](int kind) {  // 0: pageable host feeds, 1: device feeds (shared, no copy), 2: pinned (queued copies)
    Tape tape;
    Net n;
    Model model(tape.program({n.cost, n.acc}), cuda(0), 7);
    Optimizer opt(model, n.cost, optim::adam(0.01));
    auto r = test::toy_classes(1024, 1).shuffle(256, 5).batch(64);
    std::vector<double> losses;
    for (int epoch = 0; epoch < 2; ++epoch) {
      while (auto b = r.next()) {
        FeedMap f;
        for (size_t i = 0; i < 2; ++i) {
          const Tensor& t = (*b)[i];
          f[model.name_of(i ? n.label : n.x)] = LoDTensor(kind == 1 ? t.to(cuda(0)) : kind == 2 ? t.pin_memory() : t);
        }
        losses.push_back(opt.step(f)[0].get(0));
      }
    }
    return losses;
  };
  const std::vector<double> host = losses_with(0);
  REQUIRE(host.size() == 32);
  CHECK(losses_with(1) == host);
  CHECK(losses_with(2) == host);
}

TEST_CASE("cuda: with set_cuda_graphs(true) training replays captured steps and gives the uncaptured run's losses exactly") {
  if (no_device()) return;
  auto train_mlp = [](bool dropout_too) {
    Tape tape;
    auto x = data("x", f32, {-1, 8});
    auto label = data("label", i64, {-1, 1});
    Var h = fc(x, 32).act(relu);
    if (dropout_too) h = dropout(h, 0.1);
    auto cost = mean(cross_entropy(fc(h, 3).act(softmax), label));
    Model model(tape.program({cost}), cuda(0), 7);
    Optimizer opt(model, cost, optim::adam(0.01).with_schedule(optim::cosine_decay(50)));
    auto r = test::toy_classes(1000, 1).shuffle(256, 5).batch(64);  // 15 batches of 64, then one of 40: the graph is dropped and made again
    std::vector<double> losses;
    opt.train(r, {x, label}, 3, [&](const Event& e) {
      if (e.kind == Event::Kind::end_iteration) losses.push_back(e.loss);
    });
    return losses;
  };
  const std::vector<double> eager = train_mlp(false);
  const CudaGraphStats before = cuda_graph_stats();
  std::vector<double> replayed;
  {
    const GraphsSwitch on(true);
    replayed = train_mlp(false);
  }
  const CudaGraphStats after = cuda_graph_stats();
  REQUIRE(eager.size() == 48);
  CHECK(replayed == eager);  // the same kernels in the same order: the same bits
  // The training block: one capture per epoch (the last batch of 40 drops it, the next 64s make it again);
  // the update block: one. Then replays: most of the 2 x 48 runs are launches of a captured graph.
  CHECK(after.captures - before.captures == 4);
  CHECK(after.launches - before.launches >= 15 * (after.captures - before.captures));
  CHECK(after.abandoned == before.abandoned);
  // A block with dropout drawing from the executor's seeds is never captured (its draw would repeat), and trains.
  const CudaGraphStats d0 = cuda_graph_stats();
  std::vector<double> with_dropout;
  {
    const GraphsSwitch on(true);
    with_dropout = train_mlp(true);
  }
  const CudaGraphStats d1 = cuda_graph_stats();
  CHECK(with_dropout.size() == 48);
  CHECK(with_dropout.back() < with_dropout.front());
  CHECK(d1.captures - d0.captures == 1);  // the update block alone
}

TEST_CASE("cuda: with set_cuda_graphs(true) an Evaluator in another thread neither fails nor changes the training's losses") {
  // While one run captures, CUDA refuses every other thread's legacy-stream work on the device: a capture
  // starts only when its run is the device's only one, and other runs wait for it to end.
  if (no_device()) return;
  auto train = [](bool evaluate_beside) {
    const GraphsSwitch on(true);
    ToyMlp m;
    Optimizer opt(m.model, m.cost, optim::adam(0.01));
    std::atomic<bool> done{false};
    std::atomic<int> evaluations{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;
    std::thread side;
    if (evaluate_beside)
      side = std::thread([&] {
        try {
          Evaluator ev(m.model);
          const auto batch = *test::toy_classes(64, 42).batch(64).next();
          while (!done) {
            if (ev.forward(batch, {m.x, m.label}).size() != 1) throw std::runtime_error("the evaluator fetched no cost");
            ++evaluations;
          }
        } catch (...) {
          error = std::current_exception();
          failed = true;
        }
      });
    while (evaluate_beside && evaluations == 0 && !failed) std::this_thread::yield();  // the evaluator is under way first
    const std::vector<double> losses = m.train(opt, 2);
    done = true;
    if (side.joinable()) side.join();
    if (error) std::rethrow_exception(error);
    return losses;
  };
  const std::vector<double> alone = train(false);
  const std::vector<double> beside = train(true);
  REQUIRE(alone.size() == 32);
  CHECK(beside == alone);  // the evaluator only reads the parameters
}

TEST_CASE("cuda: with set_cuda_graphs(true) another thread's copies, allocations and frees outside any run neither fail nor change the training's losses") {
  // Outside runs they visit the device's capture gate: they wait while a capture is under way (on CUDA's legacy
  // stream they would fail and give the capture up), and a capture is put off while one is in flight.
  if (no_device()) return;
  auto train = [](bool work_beside, CudaGraphStats* graphs) {
    const GraphsSwitch on(true);
    ToyMlp m;
    Optimizer opt(m.model, m.cost, optim::adam(0.01));
    std::atomic<bool> done{false}, failed{false};
    std::atomic<int> rounds{0};
    std::exception_ptr error;
    std::thread side;
    if (work_beside)
      side = std::thread([&] {
        try {
          std::vector<float> host(4096);
          for (int i = 0; !done; ++i) {
            for (size_t j = 0; j < host.size(); ++j) host[j] = float(i) + float(j);
            const Tensor on_device = Tensor::from(host, {4096}).to(cuda(0));  // an allocation, a copy to the device
            const Tensor copied = on_device.to(cuda(0), true);                  // a copy on the device
            if (copied.to(cpu()).to_vector<float>() != host) throw std::runtime_error("the round trip through cuda:0 changed the values");
            ++rounds;  // both device tensors are freed here
            std::this_thread::sleep_for(std::chrono::microseconds(100));
          }
        } catch (...) {
          error = std::current_exception();
          failed = true;
        }
      });
    while (work_beside && rounds == 0 && !failed) std::this_thread::yield();  // the side work is under way first
    const CudaGraphStats before = cuda_graph_stats();
    const std::vector<double> losses = m.train(opt, 2);
    const CudaGraphStats after = cuda_graph_stats();
    done = true;
    if (side.joinable()) side.join();
    if (error) std::rethrow_exception(error);
    *graphs = {after.captures - before.captures, after.launches - before.launches, after.abandoned - before.abandoned};
    return losses;
  };
  CudaGraphStats alone_graphs, beside_graphs;
  const std::vector<double> alone = train(false, &alone_graphs);
  const std::vector<double> beside = train(true, &beside_graphs);
  REQUIRE(alone.size() == 32);
  CHECK(beside == alone);
  CHECK(alone_graphs.captures == 2);  // the forward-backward block and the update block
  CHECK(beside_graphs.captures == 2);  // put off by a visit in flight, never given up
  CHECK(beside_graphs.abandoned == 0);
  CHECK(beside_graphs.launches >= 16);
}

TEST_CASE("cuda: a mixed-precision step (its update skipped on the device when a gradient overflows) is captured as CUDA graphs, with the same losses") {
  if (no_device()) return;
  auto train = [](bool graphs) {
    const GraphsSwitch switched(graphs);
    ToyMlp m;
    Optimizer opt(m.model, m.cost, optim::adam(0.01).with_schedule(optim::cosine_decay(50)).with_mixed_precision());
    const std::vector<double> losses = m.train(opt, 2);
    return losses;
  };
  const std::vector<double> eager = train(false);
  const CudaGraphStats before = cuda_graph_stats();
  const std::vector<double> replayed = train(true);
  const CudaGraphStats after = cuda_graph_stats();
  REQUIRE(eager.size() == 32);
  CHECK(replayed == eager);
  CHECK(eager.back() < eager.front());
  CHECK(after.captures - before.captures == 2);  // the training block and the update block, each once
  CHECK(after.launches - before.launches >= 2 * 28);
  CHECK(after.abandoned == before.abandoned);
}

namespace {

/// Trains, with SGD, the f64 net `step_net(x, boot)` -> per-row [T, H] output, followed by fc(1) and a squared
/// error, 8 steps on the CPU and on cuda:0 from the same initial weights; expects the same losses and final
/// weights to 1e-10. Sequences of unsorted lengths with an empty and a length-1 one. Without a device the CPU
/// half runs alone (the net must train there) and the comparison is skipped, saying so.
template <class StepNet>
void rnn_trains_alike(StepNet step_net) {
  const int places_n = cuda_device_count() > 0 ? 2 : 1;
  if (places_n == 1) MESSAGE("no CUDA device: the CPU half alone");
  constexpr int64_t D = 3, H = 4;
  std::vector<double> losses[2], weights[2];
  const Place places[2] = {cpu(), cuda(0)};
  const LoD lod{{0, 2, 2, 7, 8, 11}};
  std::mt19937_64 rng(31);
  auto uniform = [&](Shape shape) {
    std::vector<double> v(size_t(shape.numel()));
    std::uniform_real_distribution<double> u(-1, 1);
    for (auto& e : v) e = u(rng);
    return Tensor::from<double>(v, shape);
  };
  const Tensor xs = uniform({11, D}), boot = uniform({5, H}), ys = uniform({11, 1});
  for (int p = 0; p < places_n; ++p) {
    Tape tape;
    auto x = data("x", f64, {-1, D}).lod_level(1);
    auto b0 = data("boot", f64, {-1, H});
    auto target = data("target", f64, {-1, 1});
    Var cost = mean(square_error_cost(fc(step_net(x, b0, H), 1), target));
    Model model(tape.program({cost}), places[p], 17);
    Optimizer opt(model, cost, optim::sgd(0.5));
    std::vector<LoDTensor> fetched;
    for (int step = 0; step < 8; ++step) {
      opt.step({{"x", LoDTensor(xs, lod)}, {"boot", LoDTensor(boot)}, {"target", LoDTensor(ys)}}, fetched);
      losses[p].push_back(double(fetched[0].get(0)));
    }
    for (const std::string& name : model.parameter_names()) {
      auto v = model.parameter(name).to(cpu()).to_vector<double>();
      weights[p].insert(weights[p].end(), v.begin(), v.end());
    }
  }
  CHECK(losses[0].back() < 0.9 * losses[0].front());
  if (places_n == 1) return;
  REQUIRE(losses[1].size() == losses[0].size());
  for (size_t i = 0; i < losses[0].size(); ++i) CHECK(losses[1][i] == doctest::Approx(losses[0][i]).epsilon(1e-10));
  REQUIRE(weights[1].size() == weights[0].size());
  for (size_t i = 0; i < weights[0].size(); ++i) CHECK(weights[1][i] == doctest::Approx(weights[0][i]).epsilon(1e-10));
}

}  // namespace

TEST_CASE("cuda: a recurrent group with a boot memory trains on cuda:0 as on the CPU (f64)") {
  // The recurrent op's step rows, memories, boot rows and their gradients move on the device (the executor's
  // move_rows and add_elements).
  rnn_trains_alike([](Var x, Var boot, int64_t h) {
    return recurrent_group(x, [&](Var xt) {
      auto h_prev = memory("h", h, boot);
      return fc({xt, h_prev}, h).act(oar::tanh).name("h");
    });
  });
}

TEST_CASE("cuda: a DynamicRNN (rank table, tensor arrays, a while loop) trains on cuda:0 as on the CPU (f64)") {
  // The array ops serve CUDA with their CPU kernels (rows copied on the device, the rank table and the index
  // read on the host); the while loop reads its condition from the device.
  rnn_trains_alike([](Var x, Var boot, int64_t h) {
    DynamicRNN rnn;
    rnn.step([&] {
      Var h_prev = rnn.memory(boot);
      Var next = fc({rnn.step_input(x), h_prev}, h).act(oar::tanh);
      rnn.update_memory(h_prev, next);
      rnn.output(next);
    });
    return rnn();
  });
}

TEST_CASE("cuda: step_async queues steps without waiting; reading each loss up to three steps later gives step()'s losses exactly, op by op and as graphs") {
  if (no_device()) return;
  // in_flight 0: Optimizer::step; otherwise step_async with up to `in_flight` steps queued before the oldest
  // loss is read. x pinned, label pageable (staged through page-locked memory by the executor): nothing in a
  // step makes the host wait. `scribble`: x pageable too, and overwritten with NaN once its step is queued
  // (the staging copy was made by then).
  auto losses_with = [](int in_flight, bool graphs, bool scribble = false, Place place = cuda(0)) {
    const GraphsSwitch switched(graphs);
    Tape tape;
    auto x = data("x", f32, {-1, 8});
    auto label = data("label", i64, {-1, 1});
    auto cost = mean(cross_entropy(fc(fc(x, 32).act(relu), 3).act(softmax), label));
    Model model(tape.program({cost}), place, 7);
    Optimizer opt(model, cost, optim::adam(0.01).with_schedule(optim::cosine_decay(50)));
    auto r = test::toy_classes(1024, 1).shuffle(256, 5).batch(64);
    std::vector<double> losses;
    std::vector<PendingFetch> queued;
    for (int epoch = 0; epoch < 2; ++epoch) {
      while (auto b = r.next()) {
        Tensor xb = scribble ? (*b)[0].clone() : (*b)[0].pin_memory();
        FeedMap f{{model.name_of(x), LoDTensor(xb)}, {model.name_of(label), LoDTensor((*b)[1])}};
        if (in_flight == 0) {
          const std::vector<LoDTensor> v = opt.step(f);
          CHECK(!v[0].pinned());  // a synchronous step's values are in ordinary memory, to be kept at will
          losses.push_back(v[0].get(0));
          continue;
        }
        queued.push_back(opt.step_async(f));
        if (scribble) std::fill_n(xb.data<float>(), xb.numel(), std::nanf(""));
        if (int(queued.size()) > in_flight) {
          losses.push_back(queued.front().wait().at(0).get(0));
          queued.erase(queued.begin());
        }
      }
    }
    for (auto& q : queued) losses.push_back(q.wait().at(0).get(0));
    // A step whose values are never read harms nothing after it.
    PendingFetch dropped = opt.step_async({{model.name_of(x), LoDTensor(Tensor::from<float>(std::vector<float>(64 * 8, 0.5f), {64, 8}).pin_memory())},
                                           {model.name_of(label), LoDTensor(Tensor::from<int64_t>(std::vector<int64_t>(64, 1), {64, 1}))}});
    dropped = PendingFetch();
    CHECK(std::isfinite(model.parameter(model.parameter_names().front()).to(cpu()).get(0)));
    return losses;
  };
  const std::vector<double> stepped = losses_with(0, false);
  REQUIRE(stepped.size() == 32);
  check_losses_close(losses_with(0, false, false, cpu()), stepped);  // a baseline that shares no GPU code
  CHECK(losses_with(1, false) == stepped);
  CHECK(losses_with(3, false) == stepped);
  CHECK(losses_with(3, false, true) == stepped);
  const CudaGraphStats g0 = cuda_graph_stats();
  CHECK(losses_with(3, true) == stepped);  // the same kernels in the same order: the same bits
  const CudaGraphStats g1 = cuda_graph_stats();
  CHECK(g1.captures - g0.captures == 2);  // the forward-backward block and the update block, once each
  CHECK(g1.launches - g0.launches >= 40);  // most of the 2 x 32 runs replayed
  CHECK(g1.abandoned == g0.abandoned);
}

TEST_CASE("cuda: Evaluator::forward_async: eight batches queued before any output is read each give forward()'s outputs") {
  if (no_device()) return;
  Tape tape;
  Net n;
  Model model(tape.program({n.pred}), cuda(0), 7);
  Evaluator ev(model);
  std::vector<FeedMap> batches;
  for (auto& b : test::toy_classes(8 * 64, 3).batch(64)) batches.push_back({{model.name_of(n.x), LoDTensor(b[0])}});
  REQUIRE(batches.size() == 8);
  std::vector<PendingFetch> queued;
  for (auto& f : batches) queued.push_back(ev.forward_async(f));
  for (size_t i = 0; i < batches.size(); ++i) {
    CAPTURE(i);
    const LoDTensor got = queued[i].wait().at(0);
    const LoDTensor want = ev.forward(batches[i]).at(0);
    REQUIRE(got.shape() == want.shape());
    CHECK(std::memcmp(got.raw(), want.raw(), want.bytes()) == 0);
  }
}

TEST_CASE("cuda: run_async: runs of two executors queued without waiting each fetch the values of their own point in the device's order") {
  // `slow` adds 1 to a 4M-element tensor 200 times; `quick`, on another executor, copies it to c, which it
  // fetches. Four rounds are queued before any value is read: round r's fetch must hold 200 r everywhere, though
  // every quick run writes the same buffer of c and every slow run changes a.
  constexpr int64_t n = SlowQuick::n;
  constexpr int adds = SlowQuick::adds;
  on_cpu_then_cuda([&](SlowQuick& sq) {
    auto& [scope, slow, quick, e1, e2, p1, p2] = sq;
    const bool on_cpu = e1.place().is_cpu();
    std::vector<PendingFetch> fetched, slow_runs;
    for (int round = 1; round <= 4; ++round) {
      slow_runs.push_back(e1.run_async(*p1, scope));
      fetched.push_back(e2.run_async(*p2, scope, {}, {"c"}));
    }
    if (on_cpu) {
      for (auto& f : fetched) CHECK(f.ready());
      for (auto& f : slow_runs) CHECK(f.ready());
    }
    for (int round = 1; round <= 4; ++round) {
      CAPTURE(round);
      const std::vector<LoDTensor>& c = fetched[size_t(round - 1)].wait();
      REQUIRE(c.size() == 1);
      CHECK(c[0].place().is_cpu());
      CHECK(c[0].get(0) == double(adds * round));
      CHECK(c[0].get(n / 2) == double(adds * round));
      CHECK(c[0].get(n - 1) == double(adds * round));
      // The quick run followed the slow run of its round on the device: that one's fence is passed too.
      CHECK(slow_runs[size_t(round - 1)].ready());
    }
    for (auto& f : slow_runs) CHECK(f.wait().empty());  // nothing fetched
  });
}

TEST_CASE("cuda: runs that never wait hold page-locked memory for a few runs, not for every run queued") {
  // 40 runs queued with run_async, each fed 1 MB from ordinary memory (staged through a page-locked block) and
  // fetching nothing, their PendingFetches dropped, so the host never waits; each takes ~1.5 ms of device time
  // (8 passes over 256 MB), so the host would queue them all. An executor holds at most four runs with host
  // copies in flight: a run waits for the one four before it, whose block it then reuses, so only a few blocks
  // are ever pinned. The results must be the last run's.
  if (no_device()) return;
  constexpr int64_t n = int64_t(1) << 26, m = (int64_t(1) << 18) + 4096;  // x: a page-locked size class of its own
  constexpr int passes = 8, runs = 40;
  Program prog;
  Block& b = prog.global_block();
  for (const char* v : {"a", "b"}) b.create_var(v, {.dtype = f32, .shape = Shape{n}, .persistable = true});
  b.create_var("x", {.dtype = f32, .shape = Shape{m}});
  b.create_var("y", {.dtype = f32, .shape = Shape{m}, .persistable = true});
  auto add_scale = [&](const std::string& x, const std::string& out, float scale, float bias) {
    Operator op{std::string(ops::Scale::type)};
    op.set_input(ops::Scale::x, {x}).set_output(ops::Scale::out, {out}).set_attr(ops::Scale::scale, scale).set_attr(ops::Scale::bias, bias);
    add_op(b, std::move(op));
  };
  for (int k = 0; k < passes; ++k) add_scale(k % 2 ? "b" : "a", k % 2 ? "a" : "b", 1.0f, 1.0f);
  add_scale("x", "y", 2.0f, 0.0f);
  Scope scope;
  Tensor zeros(Shape{n}, f32, cpu());
  std::memset(zeros.raw(), 0, zeros.bytes());
  scope.var("a").tensor() = LoDTensor(zeros.to(cuda(0), true));
  Executor exe(cuda(0));
  auto prepared = exe.prepare(prog, scope);
  Tensor x(Shape{m}, f32, cpu());
  MemoryStats& pinned = pinned_allocator().stats();
  const int64_t blocks_before = pinned.allocations.load();
  for (int run = 0; run < runs; ++run) {
    for (int64_t i = 0; i < m; ++i) x.data<float>()[i] = float(run);
    exe.run_async(*prepared, scope, {{"x", LoDTensor(x)}});
  }
  const int64_t blocks = pinned.allocations.load() - blocks_before;
  MESSAGE("page-locked blocks made for " << runs << " runs that never waited: " << blocks);
  CHECK(blocks >= 1);  // the feeds were staged, not copied by the driver
  CHECK(blocks <= 6);
  const Tensor y = scope.find("y")->tensor().to(cpu());
  CHECK(y.get(0) == 2.0 * (runs - 1));
  CHECK(y.get(m - 1) == 2.0 * (runs - 1));
  const Tensor a = scope.find("a")->tensor().to(cpu());
  CHECK(a.get(0) == double(passes * runs));
  CHECK(a.get(n - 1) == double(passes * runs));
}
