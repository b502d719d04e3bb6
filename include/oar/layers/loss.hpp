// oar/layers/loss.hpp: losses and the reductions they end with: mean, cross_entropy,
// softmax_with_cross_entropy, sigmoid_cross_entropy_with_logits, square_error_cost.
#pragma once
#include "oar/layers/op_layer.hpp"

namespace oar {

/// The mean of all elements: [...] -> [1].
inline Var mean(const Var& x, std::source_location loc = std::source_location::current()) { return record_unary_layer("mean", x, {}, loc); }

/// -log(x[i, label_i]) per row (hard labels: i64 [N, 1]); with .set("soft_label", true): -sum label * log x.
/// x: probabilities [N, D] -> [N, 1].
inline Var cross_entropy(const Var& x, const Var& label, std::source_location loc = std::source_location::current()) {
  return record_op_layer("cross_entropy", "cross_entropy", {{"X", {x}}, {"Label", {label}}}, {}, {{"Y"}}, loc)[0];
}

/// Softmax of logits then cross entropy, computed stably: logits [N, D] -> loss [N, 1].
inline Var softmax_with_cross_entropy(const Var& logits, const Var& label, std::source_location loc = std::source_location::current()) {
  return record_op_layer("softmax_with_cross_entropy", "softmax_with_cross_entropy", {{"Logits", {logits}}, {"Label", {label}}}, {},
                         {{"Loss"}, {"Softmax", {}, true}}, loc)[0];
}

/// max(x, 0) - x label + log(1 + e^-|x|), element-wise.
inline Var sigmoid_cross_entropy_with_logits(const Var& x, const Var& label, std::source_location loc = std::source_location::current()) {
  return record_op_layer("sigmoid_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits", {{"X", {x}}, {"Label", {label}}}, {}, {{"Out"}}, loc)[0];
}

/// (x - label)^2, element-wise (elementwise_sub then square, as Fluid builds it).
inline Var square_error_cost(const Var& x, const Var& label, std::source_location loc = std::source_location::current()) {
  auto replay = [](LayerHelper& h) {
    DType t = h.input_dtype();
    Variable& diff = h.create_tmp(t);
    Operator sub("elementwise_sub");
    sub.set_input("X", {h.input(0)}).set_input("Y", {h.input(1)}).set_output("Out", {diff.name()});
    h.append_op(std::move(sub));
    Variable& out = h.create_tmp(t);
    Operator sq("square");
    sq.set_input("X", {diff.name()}).set_output("Out", {out.name()});
    h.append_op(std::move(sq));
    return std::vector<std::string>{out.name()};
  };
  return record_layer("square_error_cost", {x, label}, std::move(replay), loc)[0];
}

}  // namespace oar
