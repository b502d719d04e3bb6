// oar/layers/loss.hpp: losses and the reductions they end with: mean, cross_entropy,
// softmax_with_cross_entropy, sigmoid_cross_entropy_with_logits, square_error_cost. Bodies in loss-inl.hpp.
#pragma once
#include <source_location>

#include "oar/layers/layer_var.hpp"
#include "oar/ops/cross_entropy.hpp"

namespace oar {

/// The mean of all elements: [...] -> [1].
Var mean(const Var& x, std::source_location loc = std::source_location::current());

/// cross_entropy's result. Options: `.soft_label()`.
class CrossEntropyLayer : public LayerVar<CrossEntropyLayer> {
 public:
  using LayerVar::LayerVar;
  struct keys {
    static constexpr Attr<bool> soft_label = ops::CrossEntropy::soft_label;
  };
  /// The label is a distribution of x's shape: loss = -sum label * log x.
  CrossEntropyLayer& soft_label(bool on = true) { return option(keys::soft_label, on); }
};

/// -log(x[i, label_i]) per row (hard labels: i64 [N, 1]); x: probabilities [N, D] -> [N, 1].
/// Options: `.soft_label()` (label: probabilities [N, D]; -sum label * log x).
CrossEntropyLayer cross_entropy(const Var& x, const Var& label, std::source_location loc = std::source_location::current());

/// Softmax of logits then cross entropy, computed stably: logits [N, D] -> loss [N, 1].
Var softmax_with_cross_entropy(const Var& logits, const Var& label, std::source_location loc = std::source_location::current());

/// max(x, 0) - x label + log(1 + e^-|x|), element-wise.
Var sigmoid_cross_entropy_with_logits(const Var& x, const Var& label, std::source_location loc = std::source_location::current());

/// (x - label)^2, element-wise (elementwise_sub then square, as Fluid builds it).
Var square_error_cost(const Var& x, const Var& label, std::source_location loc = std::source_location::current());

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/loss-inl.hpp"
#endif
