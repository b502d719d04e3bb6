// oar/layers/tensor.hpp: tensor helpers as layers: constants, casts, shape changes, joins and splits,
// indexing, element-wise arithmetic with Fluid's broadcast axis, matmul and reductions.
#pragma once
#include "oar/layers/op_layer.hpp"

namespace oar {

using SrcLoc = std::source_location;
#define OAR_HERE std::source_location loc = std::source_location::current()

/// A tensor filled with `value`: [shape] of dtype.
inline Var fill_constant(Shape shape, DType dtype, double value, OAR_HERE) {
  std::vector<int64_t> dims(shape.begin(), shape.end());
  return record_op_layer("fill_constant", "fill_constant", {}, {{"shape", dims}, {"dtype", int32_t(dtype)}, {"value", float(value)}},
                         {{"Out", dtype, true}}, loc)[0];
}
/// x converted to dtype.
inline Var cast(const Var& x, DType dtype, OAR_HERE) {
  auto replay = [dtype](LayerHelper& h) {
    Variable& out = h.create_tmp(dtype);
    Operator op("cast");
    op.set_input("X", {h.input()}).set_output("Out", {out.name()});
    op.set_attr("in_dtype", int32_t(h.input_var().dtype())).set_attr("out_dtype", int32_t(dtype));
    h.append_op(std::move(op));
    return std::vector<std::string>{out.name()};
  };
  return record_layer("cast", {x}, std::move(replay), loc)[0];
}
/// A copy of x.
inline Var assign(const Var& x, OAR_HERE) { return record_unary_layer("assign", x, {}, loc); }
/// out = scale * x + bias
inline Var scale(const Var& x, double s, double bias = 0, OAR_HERE) {
  return record_unary_layer("scale", x, {{"scale", float(s)}, {"bias", float(bias)}}, loc);
}
/// Element-wise sum of several tensors of one shape.
inline Var sums(std::vector<Var> xs, OAR_HERE) { return record_op_layer("sums", "sum", {{"X", std::move(xs)}}, {}, {{"Out"}}, loc)[0]; }
/// Joins along `axis`.
inline Var concat(std::vector<Var> xs, int axis = 0, OAR_HERE) {
  return record_op_layer("concat", "concat", {{"X", std::move(xs)}}, {{"axis", axis}}, {{"Out"}}, loc)[0];
}
/// New shape (0 copies a dim, one -1 is inferred).
inline Var reshape(const Var& x, std::vector<int32_t> shape, OAR_HERE) { return record_unary_layer("reshape", x, {{"shape", shape}}, loc); }
/// Permutes dims.
inline Var transpose(const Var& x, std::vector<int32_t> perm, OAR_HERE) { return record_unary_layer("transpose", x, {{"axis", perm}}, loc); }
/// [prod(d[:axis]), prod(d[axis:])]
inline Var flatten(const Var& x, int axis = 1, OAR_HERE) { return record_unary_layer("flatten", x, {{"axis", axis}}, loc); }
inline Var squeeze(const Var& x, std::vector<int32_t> axes, OAR_HERE) { return record_unary_layer("squeeze", x, {{"axes", axes}}, loc); }
inline Var unsqueeze(const Var& x, std::vector<int32_t> axes, OAR_HERE) { return record_unary_layer("unsqueeze", x, {{"axes", axes}}, loc); }
/// Stacks same-shaped tensors along a new `axis`.
inline Var stack(std::vector<Var> xs, int axis = 0, OAR_HERE) {
  return record_op_layer("stack", "stack", {{"X", std::move(xs)}}, {{"axis", axis}}, {{"Y"}}, loc)[0];
}
/// x[starts:ends] along `axes`.
inline Var slice(const Var& x, std::vector<int32_t> axes, std::vector<int32_t> starts, std::vector<int32_t> ends, OAR_HERE) {
  return record_op_layer("slice", "slice", {{"Input", {x}}}, {{"axes", axes}, {"starts", starts}, {"ends", ends}}, {{"Out"}}, loc)[0];
}
/// Splits into `num` equal parts along `axis`.
inline std::vector<Var> split(const Var& x, int num, int axis = 0, OAR_HERE) {
  OAR_CHECK(num >= 1, "split: num must be >= 1, got {}", num);
  auto replay = [num, axis](LayerHelper& h) {
    std::vector<std::string> outs;
    for (int i = 0; i < num; ++i) outs.push_back(h.create_tmp(h.input_var().dtype()).name());
    Operator op("split");
    op.set_input("X", {h.input()}).set_output("Out", outs).set_attr("num", num).set_attr("axis", axis);
    h.append_op(std::move(op));
    return outs;
  };
  return record_layer("split", {x}, std::move(replay), loc, num);
}
/// Rows of x picked by index.
inline Var gather(const Var& x, const Var& index, OAR_HERE) {
  return record_op_layer("gather", "gather", {{"X", {x}}, {"Index", {index}}}, {}, {{"Out"}}, loc)[0];
}
/// One-hot rows: i64 [N, 1] -> f32 [N, depth].
inline Var one_hot(const Var& x, int depth, OAR_HERE) {
  return record_op_layer("one_hot", "one_hot", {{"X", {x}}}, {{"depth", depth}}, {{"Out", f32, true}}, loc)[0];
}
/// Index of the maximum along `axis` (i64).
inline Var argmax(const Var& x, int axis = -1, OAR_HERE) {
  return record_op_layer("argmax", "arg_max", {{"X", {x}}}, {{"axis", axis}}, {{"Out", i64, true}}, loc)[0];
}
/// The k largest values along the last dim and their indices.
inline std::vector<Var> topk(const Var& x, int k, OAR_HERE) {
  return record_op_layer("top_k", "top_k", {{"X", {x}}}, {{"k", k}}, {{"Out"}, {"Indices", i64, true}}, loc);
}

#define OAR_ELEMENTWISE_LAYER(fn, op)                                                                  \
  /** x op y with Fluid's broadcast: y's dims match x's from `axis` on (-1: the trailing dims). */     \
  inline Var fn(const Var& x, const Var& y, int axis = -1, OAR_HERE) {                                 \
    return record_op_layer(#fn, #op, {{"X", {x}}, {"Y", {y}}}, {{"axis", axis}}, {{"Out"}}, loc, true)[0]; \
  }
OAR_ELEMENTWISE_LAYER(elementwise_add, elementwise_add)
OAR_ELEMENTWISE_LAYER(elementwise_sub, elementwise_sub)
OAR_ELEMENTWISE_LAYER(elementwise_mul, elementwise_mul)
OAR_ELEMENTWISE_LAYER(elementwise_div, elementwise_div)
OAR_ELEMENTWISE_LAYER(elementwise_max, elementwise_max)
OAR_ELEMENTWISE_LAYER(elementwise_min, elementwise_min)
OAR_ELEMENTWISE_LAYER(elementwise_pow, elementwise_pow)
#undef OAR_ELEMENTWISE_LAYER

/// Matrix product with optional transposes; batched over leading dims.
inline Var matmul(const Var& x, const Var& y, bool transpose_x = false, bool transpose_y = false, double alpha = 1.0, OAR_HERE) {
  return record_op_layer("matmul", "matmul", {{"X", {x}}, {"Y", {y}}},
                         {{"transpose_X", transpose_x}, {"transpose_Y", transpose_y}, {"alpha", float(alpha)}}, {{"Out"}}, loc)[0];
}

#define OAR_REDUCE_LAYER(fn)                                                                                     \
  /** Reduces over `dims` (all dims when empty); keep_dim keeps them as size 1. */                               \
  inline Var fn(const Var& x, std::vector<int32_t> dims = {}, bool keep_dim = false, OAR_HERE) {                 \
    bool all = dims.empty();                                                                                     \
    return record_unary_layer(#fn, x, {{"dim", all ? std::vector<int32_t>{0} : dims}, {"keep_dim", keep_dim}, {"reduce_all", all}}, loc); \
  }
OAR_REDUCE_LAYER(reduce_sum)
OAR_REDUCE_LAYER(reduce_mean)
OAR_REDUCE_LAYER(reduce_max)
OAR_REDUCE_LAYER(reduce_min)
#undef OAR_REDUCE_LAYER
#undef OAR_HERE

}  // namespace oar
