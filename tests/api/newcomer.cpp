// tests/api/newcomer.cpp: what a user new to oar expects of the API, checked: train(r, f, n) trains n passes
// (and a resumed run finishes its own plan), step_count() counts every update and checkpoints keep it, and an
// Evaluator needs only the feeds its fetches read.
#include "pch.hpp"
#include "support/op_check.hpp"
#include "support/temp_dir.hpp"
#include "support/toy.hpp"

#include <filesystem>
#include <thread>
#include <unistd.h>

using namespace oar;
namespace fs = std::filesystem;

namespace {

struct Net {
  Var x = data("x", f32, {-1, 8}), label = data("label", i64, {-1, 1});
  Var pred = fc(fc(x, 16).act(relu), 3).act(softmax).name("pred");
  Var cost = mean(cross_entropy(pred, label));
  Var acc = accuracy(pred, label);
};

/// 256 examples in batches of 32: 8 steps a pass.
io::Reader toy_batches() { return test::toy_classes(256, 1).shuffle(64, 3).batch(32); }

/// Trains `epochs` passes, returning each step's loss; after `crash_at` steps of this call, checkpoints to
/// `ckpt` (when given) and throws.
std::vector<double> train_losses(Optimizer& opt, io::Reader& r, const Net& n, int epochs, int crash_at = -1, const fs::path& ckpt = {}) {
  std::vector<double> out;
  opt.train(r, {n.x, n.label}, epochs, [&](const Event& e) {
    if (e.kind != Event::Kind::end_iteration) return;
    out.push_back(e.loss);
    if (int(out.size()) == crash_at) {
      if (!ckpt.empty()) opt.checkpoint(ckpt);
      throw std::runtime_error("simulated crash");
    }
  });
  return out;
}

int count_ops(const Program& p, const std::string& type) {
  int k = 0;
  for (auto* op : p.global_block().ops()) k += op->type() == type;
  return k;
}

}  // namespace

TEST_CASE("newcomer: train(reader, feeds, n) trains n more passes on every call, and n < 1 is an error naming the call") {
  Tape tape;
  Net n;
  Model model(tape.program({n.cost, n.acc}), 7);
  Optimizer opt(model, n.cost, optim::sgd(0.1));
  auto r = toy_batches();
  CHECK(train_losses(opt, r, n, 1).size() == 8);
  CHECK(opt.epoch() == 1);
  std::vector<int64_t> passes;
  opt.train(r, {n.x, n.label}, 1, [&](const Event& e) {
    if (e.kind == Event::Kind::end_iteration) passes.push_back(e.pass);
  });
  CHECK(passes == std::vector<int64_t>(8, 1));  // the second call trains the second pass
  CHECK(opt.epoch() == 2);
  CHECK(train_losses(opt, r, n, 2).size() == 16);
  CHECK(opt.epoch() == 4);
  CHECK(opt.step_count() == 32);
  for (int bad : {0, -1}) {
    CAPTURE(bad);
    const std::string msg = test::error_of([&] { opt.train(r, {n.x, n.label}, bad); });
    CHECK(msg.find("must be >= 1") != std::string::npos);
    CHECK(msg.find("newcomer.cpp") != std::string::npos);  // the user's line
  }
  CHECK(opt.epoch() == 4);
}

TEST_CASE("newcomer: a run cut short is finished by its own train() call, counted from the epoch it began at") {
  const fs::path dir = test::fresh_dir("newcomer", "resume");
  auto rule = [] { return optim::adam(0.01).with_schedule(optim::exponential_decay(10, 0.9)); };
  std::vector<double> straight;  // the second call's losses, uninterrupted
  {
    Tape tape;
    Net n;
    Model model(tape.program({n.cost, n.acc}), 7);
    Optimizer opt(model, n.cost, rule());
    auto r = toy_batches();
    train_losses(opt, r, n, 1);
    straight = train_losses(opt, r, n, 2);
    CHECK(opt.epoch() == 3);
  }
  REQUIRE(straight.size() == 16);
  std::vector<double> resumed;
  {
    Tape tape;  // a tape of its own: models of one tape share their parameters
    Net n;
    Model model(tape.program({n.cost, n.acc}), 7);
    Optimizer opt(model, n.cost, rule());
    auto r = toy_batches();
    train_losses(opt, r, n, 1);
    try {
      train_losses(opt, r, n, 2, /*crash_at=*/5, dir / "c.ckpt");  // mid-pass 1 of the run of passes 1 and 2
    } catch (const std::runtime_error&) {
    }
  }
  {
    Tape tape;
    Net n;
    Model model(tape.program({n.cost, n.acc}), 999);  // other initial values: resume overwrites them
    Optimizer opt(model, n.cost, rule());
    auto r = toy_batches();
    opt.resume(dir / "c.ckpt", &r);
    CHECK(opt.epoch() == 1);
    CHECK(opt.step_count() == 8 + 5);
    const std::vector<double> rest = train_losses(opt, r, n, 2);  // the crashed call, run again
    CHECK(rest.size() == 11);
    CHECK(opt.epoch() == 3);
    CHECK(opt.step_count() == 24);
    resumed.assign(straight.begin(), straight.begin() + 5);
    resumed.insert(resumed.end(), rest.begin(), rest.end());
    CHECK(resumed == straight);
    CHECK(train_losses(opt, r, n, 1).size() == 8);  // the run is finished: the next call trains a new pass
    CHECK(opt.epoch() == 4);
  }
  {
    // Cut short by an exception, without a checkpoint: the next call finishes the same run.
    Tape tape;
    Net n;
    Model model(tape.program({n.cost, n.acc}), 7);
    Optimizer opt(model, n.cost, rule());
    auto r = toy_batches();
    CHECK_THROWS_AS(train_losses(opt, r, n, 3, /*crash_at=*/20), std::runtime_error);  // in pass 2 of 0..2
    CHECK(opt.epoch() == 2);
    const std::string msg = test::error_of([&] { opt.train(r, {n.x, n.label}, 2); });  // passes 0 and 1 are done
    CHECK(msg.find("began at epoch 0 and has reached epoch 2") != std::string::npos);
    CHECK(msg.find("newcomer.cpp") != std::string::npos);
    CHECK(opt.epoch() == 2);
    CHECK(train_losses(opt, r, n, 3).size() == 4);  // the rest of pass 2
    CHECK(opt.epoch() == 3);
    CHECK(opt.step_count() == 24);
  }
  fs::remove_all(dir);
}

TEST_CASE("newcomer: step_count() counts the updates of step(), update() and train(), and checkpoints keep it") {
  const fs::path dir = test::fresh_dir("newcomer", "steps");
  {
    Tape tape;
    Net n;
    Model model(tape.program({n.cost, n.acc}), 7);
    Optimizer opt(model, n.cost, optim::sgd(0.1).with_schedule(optim::exponential_decay(100, 0.5)));
    auto r = toy_batches();
    const io::Batch b = *r.next();
    const FeedMap feeds{{model.name_of(n.x), b[0]}, {model.name_of(n.label), b[1]}};
    for (int i = 0; i < 375; ++i) opt.step(feeds);
    CHECK(opt.step_count() == 375);
    opt.machine().forward_backward(feeds);
    opt.update(opt.machine());
    CHECK(opt.step_count() == 376);
    opt.machine().forward_backward(feeds);
    opt.update(opt.machine().gradients());
    CHECK(opt.step_count() == 377);
    opt.step_async(feeds).wait();
    CHECK(opt.step_count() == 378);
    std::vector<int64_t> steps;
    r.reset();
    opt.train(r, {n.x, n.label}, 1, [&](const Event& e) {
      if (e.kind == Event::Kind::end_iteration) steps.push_back(e.step);
    });
    REQUIRE(steps.size() == 8);
    CHECK(steps.front() == 379);  // events go on from the steps made outside train()
    CHECK(steps.back() == 386);
    CHECK(opt.step_count() == 386);
    // The learning-rate schedule's counter saw every one of them too.
    CHECK(model.parameter("@LR_DECAY_COUNTER@").get(0) == 386);
    opt.checkpoint(dir / "s.ckpt");
  }
  Tape tape;
  Net n;
  Model model(tape.program({n.cost, n.acc}), 3);
  Optimizer opt(model, n.cost, optim::sgd(0.1).with_schedule(optim::exponential_decay(100, 0.5)));
  CHECK(opt.step_count() == 0);
  opt.resume(dir / "s.ckpt");
  CHECK(opt.step_count() == 386);
  auto r = toy_batches();
  const io::Batch b = *r.next();
  opt.step({{model.name_of(n.x), b[0]}, {model.name_of(n.label), b[1]}});
  CHECK(opt.step_count() == 387);
  fs::remove_all(dir);
}

TEST_CASE("newcomer: an Evaluator runs only the ops its fetches need, so it needs only their feeds") {
  Tape tape;
  Net n;
  Model model(tape.program({n.cost, n.acc}), 7);
  const std::string x = model.name_of(n.x), label = model.name_of(n.label);
  auto r = toy_batches();
  const io::Batch b = *r.next();
  Evaluator whole(model);  // cost and accuracy: x and label
  const auto costs = whole.forward({{x, b[0]}, {label, b[1]}});
  CHECK(costs[0].get(0) > 0.5);  // about ln 3 before training
  const std::vector<float> want = whole.activation(n.pred).to_vector<float>();
  REQUIRE(want.size() == 32 * 3);

  Evaluator ev(model, {n.pred});
  const auto got = ev.forward({{x, b[0]}});  // no label
  REQUIRE(got.size() == 1);
  CHECK(got[0].shape() == Shape{32, 3});
  CHECK(got[0].to_vector<float>() == want);
  CHECK(ev.forward(b)[0].to_vector<float>() == want);  // a whole batch still feeds: the label is not read
  CHECK(count_ops(ev.program(), "cross_entropy") == 0);
  CHECK(count_ops(ev.program(), "accuracy") == 0);
  CHECK(count_ops(whole.program(), "cross_entropy") == 1);
  const std::string asked = test::error_of([&] { ev.activation(n.cost); });
  CHECK(asked.find("do not need it") != std::string::npos);
  CHECK(asked.find(model.name_of(n.cost)) != std::string::npos);

  // A fetch that reads the label still needs it.
  Evaluator cost_only(model, {n.cost});
  const std::string missing = test::error_of([&] { cost_only.forward({{x, b[0]}}); });
  CHECK(missing.find("missing feed 'label'") != std::string::npos);
  CHECK(cost_only.forward({{x, b[0]}, {label, b[1]}})[0].get(0) == costs[0].get(0));

  // Pruned evaluators still run side by side on one model.
  std::vector<std::vector<float>> outs(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < outs.size(); ++t)
    threads.emplace_back([&, t] {
      Evaluator mine(model, {n.pred});
      for (int k = 0; k < 5; ++k) outs[t] = mine.forward({{x, b[0]}})[0].to_vector<float>();
    });
  for (auto& t : threads) t.join();
  for (auto& o : outs) CHECK(o == want);
}
