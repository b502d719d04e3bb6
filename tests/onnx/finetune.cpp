// tests/onnx/finetune.cpp: onnx_finetune WORK_DIR: a model that comes in as ONNX trains in oar, saves as an oar
// model, and loads back; and bad ONNX files are clear errors.
//
// The book conv net with its loss (softmax cross-entropy against a label input) is exported untrained, imported
// back, and trained with Adam on a task it can learn (8 x 8 images whose class is the quadrant holding a bright
// square): the imported parameters are trainable parameters, so append_backward and the Optimizer work on the
// imported program as on any other. Checks: the loss falls to under a third of its first value and accuracy
// passes 90%; Model::save / Model::load of the imported model give the same loss; an op oar lacks is an
// UnsupportedError naming the node, its op type and opset; a file that is not ONNX is an oar::Error naming it.
#include <oar/oar.hpp>
#include <oar/onnx/onnx.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace fs = std::filesystem;

namespace {

int failures = 0;

void check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

// `n` 1 x 8 x 8 images: noise, plus a bright 3 x 3 square in the quadrant that is the label (0..3).
std::pair<oar::Tensor, oar::Tensor> quadrants(int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> noise(0, 0.3f);
  std::uniform_int_distribution<int64_t> cls(0, 3), off(0, 1);
  std::vector<float> img(size_t(n * 64));
  std::vector<int64_t> label(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < 64; ++p) img[size_t(i * 64 + p)] = noise(rng);
    const int64_t c = cls(rng), r0 = (c / 2) * 4 + off(rng), c0 = (c % 2) * 4 + off(rng);
    for (int64_t r = 0; r < 3; ++r)
      for (int64_t q = 0; q < 3; ++q) img[size_t(i * 64 + (r0 + r) * 8 + c0 + q)] += 2;
    label[size_t(i)] = c;
  }
  return {oar::Tensor::from<float>(img, {n, 1, 8, 8}), oar::Tensor::from<int64_t>(label, {n, 1})};
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::fprintf(stderr, "usage: onnx_finetune WORK_DIR\n");
    return 2;
  }
  const fs::path work = argv[1];
  fs::create_directories(work);
  oar::set_num_threads(1);

  // The net and its loss, exported untrained.
  {
    oar::Tape tape;
    auto img = oar::data("img", oar::f32, {-1, 1, 8, 8});
    auto label = oar::data("label", oar::i64, {-1, 1});
    auto h = oar::pool2d(oar::conv2d(img, 8, 3).padding(1).act(oar::relu), 2).type(oar::PoolType::max).stride(2);
    auto logits = oar::fc(oar::batch_norm(h), 4);
    auto cost = oar::mean(oar::softmax_with_cross_entropy(logits, label));
    oar::Model model(tape.program({cost, logits}), 7);
    oar::onnx::ExportOptions o;
    o.feeds = model.names_of({img, label});
    o.fetches = model.names_of({cost, logits});
    oar::onnx::export_model(model, work / "net.onnx", o);
  }

  oar::Model model = oar::onnx::import_model(work / "net.onnx");
  check(model.feeds().size() == 2 && model.outputs().size() == 2, fmt::format("imported: feeds [{}], outputs [{}]", fmt::join(model.feeds(), ", "),
                                                                             fmt::join(model.outputs(), ", ")));
  check(model.parameter_names().size() == 6, fmt::format("trainable parameters: {}", fmt::join(model.parameter_names(), ", ")));
  const std::string cost = model.outputs()[0], logits = model.outputs()[1];
  oar::Optimizer opt(model, cost, oar::optim::adam(1e-2));
  std::mt19937_64 rng(5);
  std::vector<oar::LoDTensor> out;
  double first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    auto [x, y] = quadrants(32, rng);
    opt.step({{model.feeds()[0], oar::LoDTensor(x)}, {model.feeds()[1], oar::LoDTensor(y)}}, out);
    const double loss = out[0].get(0);
    if (step == 0) first = loss;
    if (step >= 140) last += loss / 10;
  }
  check(last < first / 3, fmt::format("fine-tuning the imported net: loss {:.4f} at step 1, {:.4f} over the last 10 steps", first, last));

  auto [tx, ty] = quadrants(256, rng);
  oar::FeedMap feeds = {{model.feeds()[0], oar::LoDTensor(tx)}, {model.feeds()[1], oar::LoDTensor(ty)}};
  oar::Evaluator ev(model, {cost, logits});
  auto r = ev.forward(feeds);
  int correct = 0;
  for (int64_t i = 0; i < 256; ++i) {
    int best = 0;
    for (int c = 1; c < 4; ++c)
      if (r[1].get(i * 4 + c) > r[1].get(i * 4 + best)) best = c;
    correct += best == ty.data<int64_t>()[i];
  }
  check(correct > 230, fmt::format("accuracy on 256 new images: {}/256", correct));

  // Saved as an oar model and loaded back: the same loss.
  model.save(work / "oar_model");
  oar::Model back = oar::Model::load(work / "oar_model");
  oar::Evaluator ev2(back, {cost});
  const double a = r[0].get(0), b = ev2.forward(feeds)[0].get(0);
  check(a == b, fmt::format("saved as an oar model and loaded: loss {} and {}", a, b));

  // On a GPU (when one is there): the imported net, and a sequence model whose masks need run-time Shape and
  // Range, give the CPU's outputs on cuda(0).
  if (oar::cuda_device_count() > 0) {
    oar::Model gpu = oar::onnx::import_model(work / "net.onnx", oar::cuda(0));
    oar::Model cpu = oar::onnx::import_model(work / "net.onnx");
    const auto g = oar::Evaluator(gpu, {logits}).forward(feeds)[0].to(oar::cpu());
    const auto c = oar::Evaluator(cpu, {logits}).forward(feeds)[0];
    double worst = 0;
    for (int64_t i = 0; i < c.numel(); ++i) worst = std::max(worst, std::abs(g.get(i) - c.get(i)) / (1e-6 + std::abs(c.get(i))));
    check(worst < 1e-4, fmt::format("imported onto cuda(0): logits within {:.2e} of the CPU's", worst));
    {
      oar::Tape tape;
      auto ids = oar::data("ids", oar::i64, {-1, 1}).lod_level(1);
      auto y = oar::sequence_pool(oar::dynamic_gru(oar::fc(oar::embedding(ids, {9, 4}), 3 * 4), 4), oar::SequencePoolType::max);
      oar::Model m(tape.program(y), 3);
      oar::onnx::export_model(m, work / "gru.onnx", {.feeds = m.names_of({ids}), .fetches = m.names_of({y})});
    }
    oar::Model sg = oar::onnx::import_model(work / "gru.onnx", oar::cuda(0)), sc = oar::onnx::import_model(work / "gru.onnx");
    oar::FeedMap sf = {{sc.feeds()[0], oar::LoDTensor(oar::Tensor::from<int64_t>({1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 1, 2}, {3, 4, 1}))},
                       {sc.feeds()[1], oar::LoDTensor(oar::Tensor::from<int64_t>({4, 1, 2}, {3}))}};
    const auto sgo = oar::Evaluator(sg, sg.outputs()).forward(sf)[0].to(oar::cpu());
    const auto sco = oar::Evaluator(sc, sc.outputs()).forward(sf)[0];
    worst = 0;
    for (int64_t i = 0; i < sco.numel(); ++i) worst = std::max(worst, std::abs(sgo.get(i) - sco.get(i)) / (1e-6 + std::abs(sco.get(i))));
    check(worst < 1e-4, fmt::format("an imported GRU over padded sequences onto cuda(0): within {:.2e} of the CPU's", worst));
  } else {
    std::printf("skipped: importing onto cuda(0) (no GPU here)\n");
  }

  // Errors: a node oar cannot run, a file that is not ONNX.
  {
    std::ofstream(work / "garbage.onnx") << "not a model";
    try {
      oar::onnx::import_model(work / "garbage.onnx");
      check(false, "garbage.onnx was accepted");
    } catch (const oar::Error& e) {
      check(std::string(e.what()).find("garbage.onnx") != std::string::npos && std::string(e.what()).find("not a serialized ONNX model") != std::string::npos,
            std::string("garbage: ") + e.what());
    }
    const fs::path det = "/usr/share/libonnx-testdata/data/node/test_det_2d/model.onnx";
    if (fs::exists(det)) {
      try {
        oar::onnx::import_model(det);
        check(false, "Det was accepted");
      } catch (const oar::onnx::UnsupportedError& e) {
        const std::string w = e.what();
        check(w.find("node 0") != std::string::npos && w.find("Det") != std::string::npos && w.find("opset") != std::string::npos,
              std::string("unsupported: ") + w);
      }
    }
  }
  std::printf("%s\n", failures ? "FAILED" : "all passed");
  return failures ? 1 : 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
