// examples/fit_a_line.cpp: linear regression with 13 inputs (Fluid's fit_a_line) on data this example
// generates: y = x . w + b + noise. SGD, batch 20; prints the test mean square error and the bound it must
// stay below (a few times the noise variance).
#include <oar/oar.hpp>

#include <cstdio>
#include <random>

int main() try {
  const int64_t n = 2000, features = 13;
  const double noise = 0.1;
  std::mt19937_64 rng(7);
  std::normal_distribution<float> gauss;
  std::vector<float> w(features), x(static_cast<size_t>(n * features)), y(static_cast<size_t>(n));
  for (auto& v : w) v = gauss(rng);
  for (int64_t i = 0; i < n; ++i) {
    double s = 0.5;
    for (int64_t j = 0; j < features; ++j) s += (x[size_t(i * features + j)] = gauss(rng)) * w[size_t(j)];
    y[size_t(i)] = float(s + noise * gauss(rng));
  }
  auto all = oar::io::Reader::from_tensors({oar::Tensor::from<float>(x, {n, features}), oar::Tensor::from<float>(y, {n, 1})});

  oar::Tape tape;
  auto xs = oar::data("x", oar::f32, {-1, features});
  auto ys = oar::data("y", oar::f32, {-1, 1});
  auto pred = oar::fc(xs, 1).name("y_predict");
  auto cost = oar::mean(oar::square_error_cost(pred, ys));
  oar::Model model(tape.program(cost));
  oar::Optimizer opt(model, cost, oar::optim::sgd(0.01));
  auto train = all.take(1600).shuffle(500).batch(20);
  opt.train(train, {xs, ys}, 30);

  oar::Evaluator ev(model);
  auto test = oar::io::Reader::from_tensors({oar::Tensor::from<float>(std::vector<float>(x.begin() + 1600 * features, x.end()), {400, features}),
                                             oar::Tensor::from<float>(std::vector<float>(y.begin() + 1600, y.end()), {400, 1})});
  double mse = ev.test(test.batch(100)).at(model.name_of(cost));
  double bound = 3 * noise * noise;
  std::printf("test square error %.5f (bound %.5f, noise variance %.5f)\n", mse, bound, noise * noise);
  return mse < bound ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
