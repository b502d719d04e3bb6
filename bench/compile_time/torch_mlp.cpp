// bench/compile_time/torch_mlp.cpp: the README's first example (784 -> fc 200 relu -> fc 10 softmax, Adam,
// batches of 64, test accuracy per epoch) written against LibTorch, to compare how long one model translation
// unit takes to compile (bench/compile_time.sh). It is compiled, not run.
#include <torch/torch.h>

#include <cstdio>

struct Mlp : torch::nn::Module {
  Mlp() : hidden(register_module("hidden", torch::nn::Linear(784, 200))), out(register_module("out", torch::nn::Linear(200, 10))) {}
  torch::Tensor forward(torch::Tensor x) { return torch::log_softmax(out(torch::relu(hidden(x.view({-1, 784})))), 1); }
  torch::nn::Linear hidden, out;
};

int main(int argc, char** argv) {
  const char* root = argc > 1 ? argv[1] : "fashion-mnist";
  auto normalize = torch::data::transforms::Normalize<>(0.2860, 0.3530);
  auto train = torch::data::make_data_loader(
      torch::data::datasets::MNIST(root).map(normalize).map(torch::data::transforms::Stack<>()), 64);
  auto test = torch::data::make_data_loader(
      torch::data::datasets::MNIST(root, torch::data::datasets::MNIST::Mode::kTest).map(normalize).map(torch::data::transforms::Stack<>()), 1000);
  Mlp model;
  torch::optim::Adam opt(model.parameters(), torch::optim::AdamOptions(1e-3));
  for (int epoch = 0; epoch < 5; ++epoch) {
    model.train();
    for (auto& batch : *train) {
      opt.zero_grad();
      auto loss = torch::nll_loss(model.forward(batch.data), batch.target);
      loss.backward();
      opt.step();
    }
    model.eval();
    torch::NoGradGuard no_grad;
    int64_t right = 0, seen = 0;
    for (auto& batch : *test) {
      right += model.forward(batch.data).argmax(1).eq(batch.target).sum().item<int64_t>();
      seen += batch.data.size(0);
    }
    std::printf("epoch %d: test accuracy %.4f\n", epoch + 1, double(right) / double(seen));
  }
  torch::save(model.hidden, "mlp_hidden.pt");
}
