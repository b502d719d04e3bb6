// oar/layers/loss-inl.hpp: the implementation of loss.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/loss.hpp"

#include "oar/layers/op_layer.hpp"
#include "oar/ops/cross_entropy.hpp"
#include "oar/ops/elementwise.hpp"
#include "oar/ops/elementwise_binary.hpp"
#include "oar/ops/mean.hpp"
#include "oar/ops/sigmoid_cross_entropy_with_logits.hpp"
#include "oar/ops/softmax_with_cross_entropy.hpp"
#include "oar/tape/replay.hpp"

namespace oar {

OAR_FUNC Var mean(const Var& x, std::source_location loc) { return record_unary_layer<ops::Mean>(x, {}, loc); }

OAR_FUNC CrossEntropyLayer cross_entropy(const Var& x, const Var& label, std::source_location loc) {
  using C = ops::CrossEntropy;
  // soft_label reaches the op through apply_options.
  return CrossEntropyLayer(record_op_layer("cross_entropy", C::type, {{C::x, {x}}, {C::label, {label}}}, {}, {{C::y}}, loc)[0]);
}

OAR_FUNC Var softmax_with_cross_entropy(const Var& logits, const Var& label, std::source_location loc) {
  using S = ops::SoftmaxWithCrossEntropy;
  return record_op_layer("softmax_with_cross_entropy", S::type, {{S::logits, {logits}}, {S::label, {label}}}, {}, {{S::loss}, {S::softmax, {}, true}},
                         loc)[0];
}

OAR_FUNC Var sigmoid_cross_entropy_with_logits(const Var& x, const Var& label, std::source_location loc) {
  using S = ops::SigmoidCrossEntropyWithLogits;
  return record_op_layer("sigmoid_cross_entropy_with_logits", S::type, {{S::x, {x}}, {S::label, {label}}}, {}, {{S::out}}, loc)[0];
}

OAR_FUNC Var square_error_cost(const Var& x, const Var& label, std::source_location loc) {
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
