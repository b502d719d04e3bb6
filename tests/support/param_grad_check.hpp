// tests/support/param_grad_check.hpp: a model's parameter gradients against central differences of its loss,
// for the tests of layers that build their own blocks (recurrent group, StaticRNN, cond).
#pragma once
#include <initializer_list>
#include <map>
#include <string>

#include "pch.hpp"

namespace oar::test {

/// For each parameter in `params`: grads[p] (dense) against (loss(w + delta) - loss(w - delta)) / (2 delta) for
/// every element, the loss being output 0 of `ev` on `feeds`. f64 models.
inline void check_parameter_gradients(Model& model, const std::map<std::string, Gradient>& grads, Evaluator& ev, const FeedMap& feeds,
                                      std::initializer_list<const char*> params) {
  const double delta = 1e-6;
  for (const char* p : params) {
    CAPTURE(p);
    REQUIRE(grads.count(p));
    LoDTensor& w = model.scope().tensor(p);
    auto analytic = grads.at(p).dense.to_vector<double>();
    REQUIRE(int64_t(analytic.size()) == w.numel());
    for (int64_t i = 0; i < w.numel(); ++i) {
      const double v = w.data<double>()[i];
      w.data<double>()[i] = v + delta;
      const double up = ev.forward(feeds)[0].get(0);
      w.data<double>()[i] = v - delta;
      const double down = ev.forward(feeds)[0].get(0);
      w.data<double>()[i] = v;
      CHECK(analytic[size_t(i)] == doctest::Approx((up - down) / (2 * delta)).epsilon(1e-6));
    }
  }
}

}  // namespace oar::test
