// oar/layers/loss.hpp: losses and the reductions they end with: mean, cross_entropy,
// softmax_with_cross_entropy, sigmoid_cross_entropy_with_logits, square_error_cost.
#pragma once
#include "oar/layers/op_layer.hpp"
#include "oar/ops/cross_entropy.hpp"
#include "oar/ops/elementwise.hpp"
#include "oar/ops/elementwise_binary.hpp"
#include "oar/ops/mean.hpp"
#include "oar/ops/sigmoid_cross_entropy_with_logits.hpp"
#include "oar/ops/softmax_with_cross_entropy.hpp"

namespace oar {

/// The mean of all elements: [...] -> [1].
inline Var mean(const Var& x, std::source_location loc = std::source_location::current()) { return record_unary_layer<ops::Mean>(x, {}, loc); }

/// -log(x[i, label_i]) per row (hard labels: i64 [N, 1]); with .set("soft_label", true): -sum label * log x.
/// x: probabilities [N, D] -> [N, 1].
inline Var cross_entropy(const Var& x, const Var& label, std::source_location loc = std::source_location::current()) {
  using C = ops::CrossEntropy;
  return record_op_layer("cross_entropy", C::type, {{C::x, {x}}, {C::label, {label}}}, {}, {{C::y}}, loc)[0];
}

/// Softmax of logits then cross entropy, computed stably: logits [N, D] -> loss [N, 1].
inline Var softmax_with_cross_entropy(const Var& logits, const Var& label, std::source_location loc = std::source_location::current()) {
  using S = ops::SoftmaxWithCrossEntropy;
  return record_op_layer("softmax_with_cross_entropy", S::type, {{S::logits, {logits}}, {S::label, {label}}}, {}, {{S::loss}, {S::softmax, {}, true}},
                         loc)[0];
}

/// max(x, 0) - x label + log(1 + e^-|x|), element-wise.
inline Var sigmoid_cross_entropy_with_logits(const Var& x, const Var& label, std::source_location loc = std::source_location::current()) {
  using S = ops::SigmoidCrossEntropyWithLogits;
  return record_op_layer("sigmoid_cross_entropy_with_logits", S::type, {{S::x, {x}}, {S::label, {label}}}, {}, {{S::out}}, loc)[0];
}

/// (x - label)^2, element-wise (elementwise_sub then square, as Fluid builds it).
inline Var square_error_cost(const Var& x, const Var& label, std::source_location loc = std::source_location::current()) {
  auto replay = [](LayerHelper& h) {
    DType t = h.input_dtype();
    Variable& diff = h.create_tmp(t);
    using Sub = ops::ElementwiseSub;
    Operator sub{std::string(Sub::type)};
    sub.set_input(Sub::x, {h.input(0)}).set_input(Sub::y, {h.input(1)}).set_output(Sub::out, {diff.name()});
    h.append_op(std::move(sub));
    Variable& out = h.create_tmp(t);
    using Sq = ops::SquareOp;
    Operator sq{std::string(Sq::type)};
    sq.set_input(Sq::x, {diff.name()}).set_output(Sq::out, {out.name()});
    h.append_op(std::move(sq));
    return std::vector<std::string>{out.name()};
  };
  return record_layer("square_error_cost", {x, label}, std::move(replay), loc)[0];
}

}  // namespace oar
