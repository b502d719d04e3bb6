// bench/torch_peer.cpp: the LibTorch side of oar_bench (its own translation unit: torch/torch.h takes ~30 s
// to compile). Built with OAR_BENCH_TORCH when find_package(Torch) succeeds; otherwise only stubs.
#include "common.hpp"

#include <cmath>

#if defined(OAR_BENCH_TORCH)
#include <torch/torch.h>
#endif

#if defined(OAR_WITH_BLAS)
extern "C" void openblas_set_num_threads(int);
#endif

namespace bench::torch_peer {

#if !defined(OAR_BENCH_TORCH)

bool available() { return false; }
std::string version() { return "not found"; }
std::unique_ptr<Runner> op_chain(int, bool) { return nullptr; }
std::unique_ptr<Runner> mlp(const Synthetic&, int64_t, int, bool) { return nullptr; }
std::unique_ptr<Runner> conv(const Synthetic&, int64_t, int, bool, bool) { return nullptr; }
std::unique_ptr<Runner> conv_layer(const ConvLayer&, bool, bool) { return nullptr; }
std::unique_ptr<Runner> conv_layer_autograd(const ConvLayer&, bool) { return nullptr; }
std::unique_ptr<Runner> resnet18(const Synthetic&, int64_t, int, bool) { return nullptr; }
std::unique_ptr<Runner> lstm(const Sequences&, int) { return nullptr; }
std::unique_ptr<Runner> attention(const Sequences&, int, int, bool) { return nullptr; }
CharLmResult char_lm(const CharLm&) { return {}; }

#else

bool available() { return true; }
std::string version() { return TORCH_VERSION; }

namespace {

void set_blas_threads([[maybe_unused]] int t) {
#if defined(OAR_WITH_BLAS)
  openblas_set_num_threads(t);
#endif
}

/// Thread settings of one block: LibTorch's intra-op threads and OpenBLAS's (LibTorch's BLAS), oneDNN on/off.
struct TorchRunner : Runner {
  int threads = 1;
  bool mkldnn = true;
  void enter() override {
    torch::set_num_threads(threads);
    set_blas_threads(threads);
    at::globalContext().setUserEnabledMkldnn(mkldnn);
  }
  void leave() override {
    set_blas_threads(1);  // oar calls BLAS serially from its own pool
    at::globalContext().setUserEnabledMkldnn(true);
    if (threads > 1) settle();
  }
};

struct OpChain : TorchRunner {
  int nops;
  bool prealloc;
  torch::Tensor x0, x, y;
  OpChain(int n, bool p) : nops(n), prealloc(p) {
    torch::manual_seed(1);
    x0 = torch::rand({16});
    x = x0.clone();
    y = torch::empty({16});
  }
  void step() override {
    torch::NoGradGuard no_grad;
    if (prealloc) {
      for (int i = 0; i < nops; ++i) {
        switch (i % 3) {
          case 0: x.relu_(); break;
          case 1: x.mul_(0.5); break;
          default: at::add_out(y, x, x0); std::swap(x, y); break;
        }
      }
    } else {
      for (int i = 0; i < nops; ++i) {
        switch (i % 3) {
          case 0: x = torch::relu(x); break;
          case 1: x = x * 0.5; break;
          default: x = x + x0; break;
        }
      }
    }
  }
};

struct MlpImpl : torch::nn::Module {
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
  MlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(784, 200));
    fc2 = register_module("fc2", torch::nn::Linear(200, 10));
  }
  torch::Tensor logits(const torch::Tensor& x) { return fc2(torch::relu(fc1(x))); }
};
TORCH_MODULE(Mlp);

struct ConvImpl : torch::nn::Module {
  torch::nn::Conv2d c1{nullptr}, c2{nullptr};
  torch::nn::BatchNorm2d bn{nullptr};
  torch::nn::Linear fc{nullptr};
  ConvImpl() {
    c1 = register_module("c1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 20, 5)));
    bn = register_module("bn", torch::nn::BatchNorm2d(20));
    c2 = register_module("c2", torch::nn::Conv2d(torch::nn::Conv2dOptions(20, 50, 5)));
    fc = register_module("fc", torch::nn::Linear(800, 10));
  }
  torch::Tensor logits(const torch::Tensor& x) {
    auto h = torch::max_pool2d(torch::relu(c1(x)), 2);
    h = bn(h);
    h = torch::max_pool2d(torch::relu(c2(h)), 2);
    return fc(h.view({h.size(0), 800}));
  }
};
TORCH_MODULE(Conv);

template <class Net>
struct NetRunner : TorchRunner {
  Net net;
  bool train;
  torch::Tensor images, labels;
  std::unique_ptr<torch::optim::Optimizer> opt;
  NetRunner(const Synthetic& d, int64_t batch, std::vector<int64_t> image_shape, bool train_, std::unique_ptr<torch::optim::Optimizer> (*make_opt)(Net&))
      : train(train_) {
    torch::manual_seed(1);
    image_shape.insert(image_shape.begin(), batch);
    images = torch::from_blob(const_cast<float*>(d.images.data()), image_shape, torch::kFloat32).clone();
    labels = torch::from_blob(const_cast<int64_t*>(d.labels.data()), {batch}, torch::kInt64).clone();
    if (train) {
      net->train();
      opt = make_opt(net);
    } else {
      net->eval();
    }
  }
  void step() override {
    if (train) {
      opt->zero_grad();
      auto logits = net->logits(images);
      auto loss = torch::nn::functional::cross_entropy(logits, labels);
      loss.backward();
      opt->step();
    } else {
      torch::NoGradGuard no_grad;
      auto prob = torch::softmax(net->logits(images), 1);
      (void)prob;
    }
  }
};

}  // namespace

std::unique_ptr<Runner> op_chain(int nops, bool prealloc) { return std::make_unique<OpChain>(nops, prealloc); }

std::unique_ptr<Runner> mlp(const Synthetic& d, int64_t batch, int threads, bool train) {
  auto r = std::make_unique<NetRunner<Mlp>>(d, batch, std::vector<int64_t>{784}, train, [](Mlp& n) -> std::unique_ptr<torch::optim::Optimizer> {
    return std::make_unique<torch::optim::SGD>(n->parameters(), torch::optim::SGDOptions(0.1));
  });
  r->threads = threads;
  return r;
}

std::unique_ptr<Runner> conv(const Synthetic& d, int64_t batch, int threads, bool train, bool mkldnn) {
  auto r = std::make_unique<NetRunner<Conv>>(d, batch, std::vector<int64_t>{1, 28, 28}, train, [](Conv& n) -> std::unique_ptr<torch::optim::Optimizer> {
    return std::make_unique<torch::optim::Adam>(n->parameters(), torch::optim::AdamOptions(1e-3));
  });
  r->threads = threads;
  r->mkldnn = mkldnn;
  return r;
}

namespace {

/// One conv layer alone: at::conv2d forward, or at::convolution_backward (filter gradient, and the input's
/// when the layer has one), on random tensors of the layer's shapes; no bias (oar's conv2d has none).
struct ConvLayerRunner : TorchRunner {
  ConvLayer l;
  bool backward;
  torch::Tensor x, w, g;
  ConvLayerRunner(const ConvLayer& layer, bool bwd) : l(layer), backward(bwd) {
    torch::manual_seed(3);
    x = torch::rand({l.n, l.c, l.hw, l.hw});
    w = torch::rand({l.m, l.c, l.k, l.k});
    g = torch::rand({l.n, l.m, l.out_hw(), l.out_hw()});
  }
  void step() override {
    torch::NoGradGuard no_grad;
    if (!backward) {
      auto y = torch::conv2d(x, w, {}, {l.stride, l.stride}, {l.pad, l.pad});
      return;
    }
    auto r = at::convolution_backward(g, x, w, c10::nullopt, {l.stride, l.stride}, {l.pad, l.pad}, {1, 1}, false, {0, 0}, 1, {l.input_grad, true, false});
  }
};

/// One conv layer's backward through autograd: y = torch::conv2d(x, w) recorded once per block (in enter(),
/// after oneDNN is switched), then each step torch::autograd::grad(y, {x, w}, g) on the retained graph.
struct ConvAutogradRunner : TorchRunner {
  ConvLayer l;
  torch::Tensor x, w, g, y;
  explicit ConvAutogradRunner(const ConvLayer& layer) : l(layer) {
    torch::manual_seed(3);
    x = torch::rand({l.n, l.c, l.hw, l.hw}).requires_grad_(l.input_grad);
    w = torch::rand({l.m, l.c, l.k, l.k}).requires_grad_(true);
    g = torch::rand({l.n, l.m, l.out_hw(), l.out_hw()});
  }
  void enter() override {
    TorchRunner::enter();
    y = torch::conv2d(x, w, {}, {l.stride, l.stride}, {l.pad, l.pad});
  }
  void step() override {
    auto grads = l.input_grad ? torch::autograd::grad({y}, {x, w}, {g}, /*retain_graph=*/true) : torch::autograd::grad({y}, {w}, {g}, true);
  }
  void leave() override {
    y = torch::Tensor();
    TorchRunner::leave();
  }
};

}  // namespace

std::unique_ptr<Runner> conv_layer(const ConvLayer& l, bool backward, bool mkldnn) {
  auto r = std::make_unique<ConvLayerRunner>(l, backward);
  r->mkldnn = mkldnn;
  return r;
}

std::unique_ptr<Runner> conv_layer_autograd(const ConvLayer& l, bool mkldnn) {
  auto r = std::make_unique<ConvAutogradRunner>(l);
  r->mkldnn = mkldnn;
  return r;
}

namespace {

/// torchvision's BasicBlock: conv 3x3 (stride s) + BN + relu, conv 3x3 + BN, plus the input or, when the
/// shape changes, its 1x1 stride-s projection + BN; relu of the sum. Convolutions without bias.
struct BasicBlockImpl : torch::nn::Module {
  torch::nn::Conv2d c1{nullptr}, c2{nullptr}, proj{nullptr};
  torch::nn::BatchNorm2d b1{nullptr}, b2{nullptr}, bproj{nullptr};
  BasicBlockImpl(int64_t in, int64_t out, int64_t stride) {
    namespace nn = torch::nn;
    c1 = register_module("c1", nn::Conv2d(nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)));
    b1 = register_module("b1", nn::BatchNorm2d(out));
    c2 = register_module("c2", nn::Conv2d(nn::Conv2dOptions(out, out, 3).padding(1).bias(false)));
    b2 = register_module("b2", nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      proj = register_module("proj", nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
      bproj = register_module("bproj", nn::BatchNorm2d(out));
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto h = b2(c2(torch::relu(b1(c1(x)))));
    return torch::relu(h + (proj ? bproj(proj(x)) : x));
  }
};
TORCH_MODULE(BasicBlock);

/// ResNet-18: conv 7x7/2 (64) + BN + relu, max pool 3x3/2, four stages of two BasicBlocks (64, 128, 256, 512
/// channels; the first block of stages 2-4 has stride 2), global average pool, linear 512 -> 1000.
struct Resnet18Impl : torch::nn::Module {
  torch::nn::Conv2d stem{nullptr};
  torch::nn::BatchNorm2d stem_bn{nullptr};
  torch::nn::Sequential blocks;
  torch::nn::Linear fc{nullptr};
  Resnet18Impl() {
    namespace nn = torch::nn;
    stem = register_module("stem", nn::Conv2d(nn::Conv2dOptions(3, 64, 7).stride(2).padding(3).bias(false)));
    stem_bn = register_module("stem_bn", nn::BatchNorm2d(64));
    int64_t in = 64;
    for (int64_t out : {64, 128, 256, 512}) {
      blocks->push_back(BasicBlock(in, out, out == 64 ? 1 : 2));
      blocks->push_back(BasicBlock(out, out, 1));
      in = out;
    }
    register_module("blocks", blocks);
    fc = register_module("fc", nn::Linear(512, 1000));
  }
  torch::Tensor logits(const torch::Tensor& x) {
    auto h = torch::max_pool2d(torch::relu(stem_bn(stem(x))), 3, 2, 1);
    h = blocks->forward(h);
    return fc(torch::adaptive_avg_pool2d(h, {1, 1}).flatten(1));
  }
};
TORCH_MODULE(Resnet18);

/// NetRunner's training step on ResNet-18, keeping each step's loss.
struct Resnet18Runner : NetRunner<Resnet18> {
  std::vector<double> loss_log;
  using NetRunner::NetRunner;
  void step() override {
    opt->zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net->logits(images), labels);
    loss.backward();
    opt->step();
    loss_log.push_back(loss.item<double>());
  }
  const std::vector<double>* losses() const override { return &loss_log; }
};

}  // namespace

std::unique_ptr<Runner> resnet18(const Synthetic& d, int64_t batch, int threads, bool mkldnn) {
  torch::manual_seed(1);  // NetRunner seeds after its members (the net) are built
  auto r = std::make_unique<Resnet18Runner>(d, batch, std::vector<int64_t>{3, 224, 224}, true, [](Resnet18& n) -> std::unique_ptr<torch::optim::Optimizer> {
    return std::make_unique<torch::optim::SGD>(n->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  });
  r->threads = threads;
  r->mkldnn = mkldnn;
  return r;
}

namespace {

struct LstmRunner : TorchRunner {
  torch::nn::LSTM net{nullptr};
  torch::Tensor x, lengths;
  bool packed = false;
  std::unique_ptr<torch::optim::SGD> opt;
  LstmRunner(const Sequences& d, int threads_) {
    threads = threads_;
    torch::manual_seed(1);
    net = torch::nn::LSTM(torch::nn::LSTMOptions(d.input, d.hidden));
    const auto batch = int64_t(d.lengths.size());
    const int64_t steps = *std::max_element(d.lengths.begin(), d.lengths.end());
    packed = *std::min_element(d.lengths.begin(), d.lengths.end()) != steps;
    x = torch::zeros({steps, batch, d.input});  // time-major, zero-padded
    auto acc = x.accessor<float, 3>();
    int64_t row = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < d.lengths[size_t(b)]; ++t, ++row)
        for (int64_t k = 0; k < d.input; ++k) acc[t][b][k] = d.x[size_t(row * d.input + k)];
    lengths = torch::tensor(d.lengths, torch::kInt64);
    opt = std::make_unique<torch::optim::SGD>(net->parameters(), torch::optim::SGDOptions(0.1));
  }
  void step() override {
    opt->zero_grad();
    torch::Tensor loss;
    if (packed) {
      auto in = torch::nn::utils::rnn::pack_padded_sequence(x, lengths, /*batch_first=*/false, /*enforce_sorted=*/false);
      loss = std::get<0>(net->forward_with_packed_input(in)).data().mean();
    } else {
      loss = std::get<0>(net->forward(x)).mean();
    }
    loss.backward();
    opt->step();
  }
};

}  // namespace

std::unique_ptr<Runner> lstm(const Sequences& d, int threads) { return std::make_unique<LstmRunner>(d, threads); }

namespace {

struct AttentionRunner : TorchRunner {
  torch::nn::MultiheadAttention mha{nullptr};
  torch::Tensor x, pad;
  bool padded = false, train = false;
  std::unique_ptr<torch::optim::SGD> opt;
  AttentionRunner(const Sequences& d, int heads, int threads_, bool train_) : train(train_) {
    threads = threads_;
    torch::manual_seed(1);
    mha = torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(d.input, heads));
    const auto batch = int64_t(d.lengths.size());
    const int64_t longest = *std::max_element(d.lengths.begin(), d.lengths.end());
    padded = *std::min_element(d.lengths.begin(), d.lengths.end()) != longest;
    x = torch::zeros({longest, batch, d.input});
    pad = torch::ones({batch, longest}, torch::kBool);
    auto acc = x.accessor<float, 3>();
    auto pa = pad.accessor<bool, 2>();
    int64_t row = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < d.lengths[size_t(b)]; ++t, ++row) {
        pa[b][t] = false;
        for (int64_t k = 0; k < d.input; ++k) acc[t][b][k] = d.x[size_t(row * d.input + k)];
      }
    opt = std::make_unique<torch::optim::SGD>(mha->parameters(), torch::optim::SGDOptions(0.1));
  }
  torch::Tensor forward() { return std::get<0>(mha->forward(x, x, x, padded ? pad : torch::Tensor(), /*need_weights=*/false)); }
  void step() override {
    if (!train) {
      torch::NoGradGuard no_grad;
      forward();
      return;
    }
    opt->zero_grad();
    forward().mean().backward();
    opt->step();
  }
};

}  // namespace

std::unique_ptr<Runner> attention(const Sequences& d, int heads, int threads, bool train) {
  return std::make_unique<AttentionRunner>(d, heads, threads, train);
}

namespace {

/// A tensor holding a copy of `v`, shaped `shape`.
torch::Tensor tensor_of(const std::vector<float>& v, std::vector<int64_t> shape) {
  return torch::from_blob(const_cast<float*>(v.data()), shape, torch::kFloat32).clone();
}

struct CharLmNetImpl : torch::nn::Module {
  torch::nn::Embedding emb{nullptr};
  torch::nn::LSTM lstm{nullptr};
  torch::nn::Linear out{nullptr};
  explicit CharLmNetImpl(const CharLm& m) {
    emb = register_module("emb", torch::nn::Embedding(m.vocab, m.embed));
    lstm = register_module("lstm", torch::nn::LSTM(torch::nn::LSTMOptions(m.embed, m.hidden)));
    out = register_module("out", torch::nn::Linear(m.hidden, m.vocab));
    torch::NoGradGuard no_grad;
    emb->weight.copy_(tensor_of(m.emb, {m.vocab, m.embed}));
    lstm->named_parameters()["weight_ih_l0"].copy_(tensor_of(m.w_ih, {4 * m.hidden, m.embed}));
    lstm->named_parameters()["weight_hh_l0"].copy_(tensor_of(m.w_hh, {4 * m.hidden, m.hidden}));
    lstm->named_parameters()["bias_ih_l0"].copy_(tensor_of(m.b_ih, {4 * m.hidden}));
    lstm->named_parameters()["bias_hh_l0"].copy_(tensor_of(m.b_hh, {4 * m.hidden}));
    out->weight.copy_(tensor_of(m.w_out, {m.vocab, m.hidden}));
    out->bias.copy_(tensor_of(m.b_out, {m.vocab}));
  }
  /// x: [T, B] ids -> logits [T, B, vocab].
  torch::Tensor logits(const torch::Tensor& x) { return out(std::get<0>(lstm->forward(emb(x)))); }
};
TORCH_MODULE(CharLmNet);

/// The `count` chunks of `n` characters starting at `starts[0 .. count)`, time-major: inputs and next characters [n, count].
std::pair<torch::Tensor, torch::Tensor> char_batch(const std::vector<int64_t>& text, const int64_t* starts, int64_t count, int64_t n) {
  std::vector<int64_t> x(size_t(n * count)), y(size_t(n * count));
  for (int64_t t = 0; t < n; ++t)
    for (int64_t b = 0; b < count; ++b) {
      x[size_t(t * count + b)] = text[size_t(starts[b] + t)];
      y[size_t(t * count + b)] = text[size_t(starts[b] + t + 1)];
    }
  return {torch::from_blob(x.data(), {n, count}, torch::kInt64).clone(), torch::from_blob(y.data(), {n, count}, torch::kInt64).clone()};
}

}  // namespace

CharLmResult char_lm(const CharLm& m) {
  torch::set_num_threads(1);
  set_blas_threads(1);
  CharLmNet net(m);
  torch::optim::Adam opt(net->parameters(), torch::optim::AdamOptions(m.lr));
  namespace F = torch::nn::functional;
  CharLmResult r;
  const double t0 = cpu_s();
  for (int64_t step = 0; step < m.steps; ++step) {
    auto [x, y] = char_batch(m.train, m.starts.data() + step * m.batch, m.batch, m.chunk);
    for (auto& g : opt.param_groups())  // oar's cosine_decay: step k uses lr / 2 (1 + cos(pi k / steps))
      static_cast<torch::optim::AdamOptions&>(g.options()).lr(m.lr * 0.5 * (1 + std::cos(M_PI * double(step) / double(m.steps))));
    opt.zero_grad();
    auto loss = F::cross_entropy(net->logits(x).view({-1, m.vocab}), y.view({-1}));
    loss.backward();
    torch::nn::utils::clip_grad_norm_(net->parameters(), m.clip);
    opt.step();
    r.losses.push_back(loss.item<double>());
  }
  r.train_cpu_s = cpu_s() - t0;

  torch::NoGradGuard no_grad;
  std::vector<int64_t> starts;
  for (int64_t s = 0; s + 1 < int64_t(m.valid.size()); s += m.chunk) starts.push_back(s);
  const int64_t full = int64_t(m.valid.size() - 1) / m.chunk;  // chunks of full length; a shorter one may follow
  double nats = 0;
  int64_t count = 0;
  auto score = [&](int64_t first, int64_t n, int64_t len) {
    auto [x, y] = char_batch(m.valid, starts.data() + first, n, len);
    nats += F::cross_entropy(net->logits(x).view({-1, m.vocab}), y.view({-1}), F::CrossEntropyFuncOptions().reduction(torch::kSum)).item<double>();
    count += n * len;
  };
  for (int64_t b = 0; b < full; b += m.valid_batch) score(b, std::min(m.valid_batch, full - b), m.chunk);
  if (int64_t(starts.size()) > full) score(full, 1, int64_t(m.valid.size()) - 1 - starts.back());
  r.valid_bpc = nats / double(count) / std::log(2.0);
  return r;
}

#endif

}  // namespace bench::torch_peer
