// oar/layers/tensor-inl.hpp: the implementation of tensor.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/layers/tensor.hpp"

#include "oar/layers/op_layer.hpp"
#include "oar/ops/arg_max.hpp"
#include "oar/ops/assign.hpp"
#include "oar/ops/concat.hpp"
#include "oar/ops/elementwise_binary.hpp"
#include "oar/ops/fill_constant.hpp"
#include "oar/ops/gather.hpp"
#include "oar/ops/matmul.hpp"
#include "oar/ops/one_hot.hpp"
#include "oar/ops/reduce.hpp"
#include "oar/ops/scale.hpp"
#include "oar/ops/shape_ops.hpp"
#include "oar/ops/slice.hpp"
#include "oar/ops/sum.hpp"
#include "oar/ops/transpose.hpp"
#include "oar/tape/replay.hpp"

namespace oar {

OAR_FUNC Var fill_constant(Shape shape, DType dtype, double value, SrcLoc loc) {
  std::vector<int64_t> dims(shape.begin(), shape.end());
  using F = ops::FillConstant;
  return record_op_layer("fill_constant", F::type, {}, {{F::shape, dims}, {F::dtype, int32_t(dtype)}, {F::value, float(value)}},
                         {{F::out, dtype, true}}, loc)[0];
}
OAR_FUNC Var cast(const Var& x, DType dtype, SrcLoc loc) {
  auto replay = [dtype](LayerHelper& h) {
    Variable& out = h.create_tmp(dtype);
    using C = ops::Cast;
    Operator op{std::string(C::type)};
    op.set_input(C::x, {h.input()}).set_output(C::out, {out.name()});
    op.set_attr(C::in_dtype, int32_t(h.input_var().dtype())).set_attr(C::out_dtype, int32_t(dtype));
    h.append_op(std::move(op));
    return std::vector<std::string>{out.name()};
  };
  return record_layer("cast", {x}, std::move(replay), loc)[0];
}
OAR_FUNC Var assign(const Var& x, SrcLoc loc) { return record_unary_layer<ops::Assign>(x, {}, loc); }
OAR_FUNC Var scale(const Var& x, double s, double bias, SrcLoc loc) {
  return record_unary_layer<ops::Scale>(x, {{ops::Scale::scale, float(s)}, {ops::Scale::bias, float(bias)}}, loc);
}
OAR_FUNC Var sums(std::vector<Var> xs, SrcLoc loc) {
  return record_op_layer("sums", ops::Sum::type, {{ops::Sum::x, std::move(xs)}}, {}, {{ops::Sum::out}}, loc)[0];
}
OAR_FUNC Var concat(std::vector<Var> xs, int axis, SrcLoc loc) {
  using C = ops::Concat;
  return record_op_layer("concat", C::type, {{C::x, std::move(xs)}}, {{C::axis, int32_t(axis)}}, {{C::out}}, loc)[0];
}
OAR_FUNC Var reshape(const Var& x, std::vector<int32_t> shape, SrcLoc loc) {
  return record_unary_layer<ops::Reshape>(x, {{ops::Reshape::shape, shape}}, loc);
}
OAR_FUNC Var transpose(const Var& x, std::vector<int32_t> perm, SrcLoc loc) {
  return record_unary_layer<ops::Transpose>(x, {{ops::Transpose::axis, perm}}, loc);
}
OAR_FUNC Var flatten(const Var& x, int axis, SrcLoc loc) { return record_unary_layer<ops::Flatten>(x, {{ops::Flatten::axis, int32_t(axis)}}, loc); }
OAR_FUNC Var squeeze(const Var& x, std::vector<int32_t> axes, SrcLoc loc) {
  return record_unary_layer<ops::Squeeze>(x, {{ops::Squeeze::axes, axes}}, loc);
}
OAR_FUNC Var unsqueeze(const Var& x, std::vector<int32_t> axes, SrcLoc loc) {
  return record_unary_layer<ops::Unsqueeze>(x, {{ops::Unsqueeze::axes, axes}}, loc);
}
OAR_FUNC Var stack(std::vector<Var> xs, int axis, SrcLoc loc) {
  using S = ops::Stack;
  return record_op_layer("stack", S::type, {{S::x, std::move(xs)}}, {{S::axis, int32_t(axis)}}, {{S::y}}, loc)[0];
}
OAR_FUNC Var slice(const Var& x, std::vector<int32_t> axes, std::vector<int32_t> starts, std::vector<int32_t> ends, SrcLoc loc) {
  using S = ops::Slice;
  return record_op_layer("slice", S::type, {{S::input, {x}}}, {{S::axes, axes}, {S::starts, starts}, {S::ends, ends}}, {{S::out}}, loc)[0];
}
OAR_FUNC std::vector<Var> split(const Var& x, int num, int axis, SrcLoc loc) {
  OAR_CHECK(num >= 1, "split: num must be >= 1, got {}", num);
  auto replay = [num, axis](LayerHelper& h) {
    std::vector<std::string> outs;
    for (int i = 0; i < num; ++i) outs.push_back(h.create_tmp(h.input_var().dtype()).name());
    using S = ops::Split;
    Operator op{std::string(S::type)};
    op.set_input(S::x, {h.input()}).set_output(S::out, outs).set_attr(S::num, int32_t(num)).set_attr(S::axis, int32_t(axis));
    h.append_op(std::move(op));
    return outs;
  };
  return record_layer("split", {x}, std::move(replay), loc, num);
}
OAR_FUNC Var gather(const Var& x, const Var& index, SrcLoc loc) {
  using G = ops::Gather;
  return record_op_layer("gather", G::type, {{G::x, {x}}, {G::index, {index}}}, {}, {{G::out}}, loc)[0];
}
OAR_FUNC Var one_hot(const Var& x, int depth, SrcLoc loc) {
  using O = ops::OneHot;
  return record_op_layer("one_hot", O::type, {{O::x, {x}}}, {{O::depth, int32_t(depth)}}, {{O::out, f32, true}}, loc)[0];
}
OAR_FUNC Var argmax(const Var& x, int axis, SrcLoc loc) {
  using A = ops::ArgMax;
  return record_op_layer("argmax", A::type, {{A::x, {x}}}, {{A::axis, int64_t(axis)}}, {{A::out, i64, true}}, loc)[0];
}
OAR_FUNC std::vector<Var> topk(const Var& x, int k, SrcLoc loc) {
  using T = ops::TopK;
  return record_op_layer("top_k", T::type, {{T::x, {x}}}, {{T::k, int32_t(k)}}, {{T::out}, {T::indices, i64, true}}, loc);
}

#define OAR_ELEMENTWISE_LAYER(fn, Op)                                                                                      \
  OAR_FUNC Var fn(const Var& x, const Var& y, int axis, SrcLoc loc) {                                                      \
    using O = ops::Op;                                                                                                     \
    return record_op_layer(#fn, O::type, {{O::x, {x}}, {O::y, {y}}}, {{O::axis, int32_t(axis)}}, {{O::out}}, loc, true)[0]; \
  }
OAR_ELEMENTWISE_LAYER(elementwise_add, ElementwiseAdd)
OAR_ELEMENTWISE_LAYER(elementwise_sub, ElementwiseSub)
OAR_ELEMENTWISE_LAYER(elementwise_mul, ElementwiseMul)
OAR_ELEMENTWISE_LAYER(elementwise_div, ElementwiseDiv)
OAR_ELEMENTWISE_LAYER(elementwise_max, ElementwiseMax)
OAR_ELEMENTWISE_LAYER(elementwise_min, ElementwiseMin)
OAR_ELEMENTWISE_LAYER(elementwise_pow, ElementwisePow)
#undef OAR_ELEMENTWISE_LAYER

OAR_FUNC Var matmul(const Var& x, const Var& y, bool transpose_x, bool transpose_y, double alpha, SrcLoc loc) {
  using M = ops::Matmul;
  return record_op_layer("matmul", M::type, {{M::x, {x}}, {M::y, {y}}},
                         {{M::transpose_x, transpose_x}, {M::transpose_y, transpose_y}, {M::alpha, float(alpha)}}, {{M::out}}, loc)[0];
}

#define OAR_REDUCE_LAYER(fn, Op)                                                                                                 \
  OAR_FUNC Var fn(const Var& x, std::vector<int32_t> dims, bool keep_dim, SrcLoc loc) {                                         \
    using O = ops::Op;                                                                                                           \
    bool all = dims.empty();                                                                                                     \
    return record_unary_layer<O>(x, {{O::dim, all ? std::vector<int32_t>{0} : dims}, {O::keep_dim, keep_dim}, {O::reduce_all, all}}, loc); \
  }
OAR_REDUCE_LAYER(reduce_sum, ReduceSum)
OAR_REDUCE_LAYER(reduce_mean, ReduceMean)
OAR_REDUCE_LAYER(reduce_max, ReduceMax)
OAR_REDUCE_LAYER(reduce_min, ReduceMin)
#undef OAR_REDUCE_LAYER

}  // namespace oar
