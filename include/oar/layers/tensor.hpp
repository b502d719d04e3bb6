// oar/layers/tensor.hpp: tensor helpers as layers: constants, casts, shape changes, joins and splits,
// indexing, element-wise arithmetic with Fluid's broadcast axis, matmul and reductions. Bodies in tensor-inl.hpp.
#pragma once
#include <source_location>
#include <vector>

#include "oar/tape/tape.hpp"

namespace oar {

using SrcLoc = std::source_location;
#define OAR_HERE std::source_location loc = std::source_location::current()

/// A tensor filled with `value`: [shape] of dtype.
Var fill_constant(Shape shape, DType dtype, double value, OAR_HERE);
/// x converted to dtype.
Var cast(const Var& x, DType dtype, OAR_HERE);
/// A copy of x.
Var assign(const Var& x, OAR_HERE);
/// out = scale * x + bias
Var scale(const Var& x, double s, double bias = 0, OAR_HERE);
/// Element-wise sum of several tensors of one shape.
Var sums(std::vector<Var> xs, OAR_HERE);
/// Joins along `axis`.
Var concat(std::vector<Var> xs, int axis = 0, OAR_HERE);
/// New shape (0 copies a dim, one -1 is inferred).
Var reshape(const Var& x, std::vector<int32_t> shape, OAR_HERE);
/// Permutes dims.
Var transpose(const Var& x, std::vector<int32_t> perm, OAR_HERE);
/// [prod(d[:axis]), prod(d[axis:])]
Var flatten(const Var& x, int axis = 1, OAR_HERE);
/// Removes the size-1 dims `axes`.
Var squeeze(const Var& x, std::vector<int32_t> axes, OAR_HERE);
/// Inserts size-1 dims at `axes`.
Var unsqueeze(const Var& x, std::vector<int32_t> axes, OAR_HERE);
/// Stacks same-shaped tensors along a new `axis`.
Var stack(std::vector<Var> xs, int axis = 0, OAR_HERE);
/// x[starts:ends] along `axes`.
Var slice(const Var& x, std::vector<int32_t> axes, std::vector<int32_t> starts, std::vector<int32_t> ends, OAR_HERE);
/// Splits into `num` equal parts along `axis`.
std::vector<Var> split(const Var& x, int num, int axis = 0, OAR_HERE);
/// Rows of x picked by index.
Var gather(const Var& x, const Var& index, OAR_HERE);
/// One-hot rows: i64 [N, 1] -> f32 [N, depth].
Var one_hot(const Var& x, int depth, OAR_HERE);
/// Index of the maximum along `axis` (i64).
Var argmax(const Var& x, int axis = -1, OAR_HERE);
/// The k largest values along the last dim and their indices.
std::vector<Var> topk(const Var& x, int k, OAR_HERE);

/// x op y with Fluid's broadcast: y's dims match x's from `axis` on (-1: the trailing dims). `.act` applies.
Var elementwise_add(const Var& x, const Var& y, int axis = -1, OAR_HERE);
Var elementwise_sub(const Var& x, const Var& y, int axis = -1, OAR_HERE);
Var elementwise_mul(const Var& x, const Var& y, int axis = -1, OAR_HERE);
Var elementwise_div(const Var& x, const Var& y, int axis = -1, OAR_HERE);
Var elementwise_max(const Var& x, const Var& y, int axis = -1, OAR_HERE);
Var elementwise_min(const Var& x, const Var& y, int axis = -1, OAR_HERE);
Var elementwise_pow(const Var& x, const Var& y, int axis = -1, OAR_HERE);

/// Matrix product with optional transposes; batched over leading dims.
Var matmul(const Var& x, const Var& y, bool transpose_x = false, bool transpose_y = false, double alpha = 1.0, OAR_HERE);

/// Reduces over `dims` (all dims when empty); keep_dim keeps them as size 1.
Var reduce_sum(const Var& x, std::vector<int32_t> dims = {}, bool keep_dim = false, OAR_HERE);
Var reduce_mean(const Var& x, std::vector<int32_t> dims = {}, bool keep_dim = false, OAR_HERE);
Var reduce_max(const Var& x, std::vector<int32_t> dims = {}, bool keep_dim = false, OAR_HERE);
Var reduce_min(const Var& x, std::vector<int32_t> dims = {}, bool keep_dim = false, OAR_HERE);

#undef OAR_HERE

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/layers/tensor-inl.hpp"
#endif
