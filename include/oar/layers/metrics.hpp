// oar/layers/metrics.hpp: in-graph evaluators. They stay on the tape (and in the program) even when no
// output depends on them.
#pragma once
#include "oar/layers/op_layer.hpp"

namespace oar {

/// Fraction of rows whose label is among the k highest scores: top_k then accuracy. input [N, D], label i64 [N, 1] -> [1].
inline Var accuracy(const Var& input, const Var& label, int k = 1, std::source_location loc = std::source_location::current()) {
  OAR_CHECK(k >= 1, "accuracy: k must be >= 1, got {}", k);
  auto replay = [k](LayerHelper& h) {
    DType t = h.input_var(0).dtype();
    Variable& values = h.create_tmp(t, true);
    Variable& indices = h.create_tmp(i64, true);
    Operator top("top_k");
    top.set_input("X", {h.input(0)}).set_output("Out", {values.name()}).set_output("Indices", {indices.name()}).set_attr("k", k);
    h.append_op(std::move(top));
    Variable& acc = h.create_tmp(f32, true);
    Variable& correct = h.create_tmp(i64, true);
    Variable& total = h.create_tmp(i64, true);
    Operator op("accuracy");
    op.set_input("Out", {values.name()}).set_input("Indices", {indices.name()}).set_input("Label", {h.input(1)});
    op.set_output("Accuracy", {acc.name()}).set_output("Correct", {correct.name()}).set_output("Total", {total.name()});
    h.append_op(std::move(op));
    return std::vector<std::string>{acc.name()};
  };
  return record_layer("accuracy", {input, label}, std::move(replay), loc)[0];
}

}  // namespace oar
