// oar/ops/list_tensor.hpp: the tensor family's part of the op list (joined in ops/op_list.hpp): creation
// (fill_constant, random), copies and casts, shape ops, run-time sizes (shape, range), joining/splitting,
// indexing and selection.
#pragma once
#include "oar/ops/arg_max.hpp"
#include "oar/ops/assign.hpp"
#include "oar/ops/concat.hpp"
#include "oar/ops/fill_constant.hpp"
#include "oar/ops/gather.hpp"
#include "oar/ops/lookup_table.hpp"
#include "oar/ops/one_hot.hpp"
#include "oar/ops/random.hpp"
#include "oar/ops/runtime_shape.hpp"
#include "oar/ops/shape_ops.hpp"
#include "oar/ops/slice.hpp"
#include "oar/ops/transpose.hpp"

namespace oar {

using TensorOps = op_list<ops::FillConstant, ops::FillConstantBatchSizeLike, ops::UniformRandom, ops::GaussianRandom,
                          ops::TruncatedGaussianRandom, ops::Assign, ops::Cast, ops::Increment, ops::Reshape, ops::Flatten,
                          ops::Squeeze, ops::Unsqueeze, ops::Transpose, ops::Concat, ops::Split, ops::Stack, ops::Slice,
                          ops::Gather, ops::LookupTable, ops::OneHot, ops::ArgMax, ops::ArgMin, ops::TopK, ops::ShapeOf, ops::Range>;

}  // namespace oar
