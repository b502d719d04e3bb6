// oar/layers/metrics-inl.hpp: the implementation of metrics.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/metrics.hpp"

#include "oar/ops/accuracy.hpp"
#include "oar/ops/arg_max.hpp"
#include "oar/tape/replay.hpp"

namespace oar {

OAR_FUNC Var accuracy(const Var& input, const Var& label, int k, std::source_location loc) {
  OAR_CHECK(k >= 1, "accuracy: k must be >= 1, got {}", k);
  auto replay = [k](LayerHelper& h) {
    DType t = h.input_var(0).dtype();
    Variable& values = h.create_tmp(t, true);
    Variable& indices = h.create_tmp(i64, true);
    using T = ops::TopK;
    Operator top{std::string(T::type)};
    top.set_input(T::x, {h.input(0)}).set_output(T::out, {values.name()}).set_output(T::indices, {indices.name()}).set_attr(T::k, int32_t(k));
    h.append_op(std::move(top));
    Variable& acc = h.create_tmp(f32, true);
    Variable& correct = h.create_tmp(i64, true);
    Variable& total = h.create_tmp(i64, true);
    using A = ops::Accuracy;
    Operator op{std::string(A::type)};
    op.set_input(A::out, {values.name()}).set_input(A::indices, {indices.name()}).set_input(A::label, {h.input(1)});
    op.set_output(A::accuracy, {acc.name()}).set_output(A::correct, {correct.name()}).set_output(A::total, {total.name()});
    h.append_op(std::move(op));
    return std::vector<std::string>{acc.name()};
  };
  return record_layer("accuracy", {input, label}, std::move(replay), loc)[0];
}

}  // namespace oar
