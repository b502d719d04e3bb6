// oar/ops/list_math.hpp: the math family's part of the op list (joined in ops/op_list.hpp).
#pragma once
#include "oar/ops/clip_by_norm.hpp"
#include "oar/ops/elementwise_binary.hpp"
#include "oar/ops/fill_zeros_like.hpp"
#include "oar/ops/matmul.hpp"
#include "oar/ops/mean.hpp"
#include "oar/ops/op.hpp"
#include "oar/ops/reduce.hpp"
#include "oar/ops/scale.hpp"
#include "oar/ops/sign.hpp"
#include "oar/ops/squared_l2_norm.hpp"
#include "oar/ops/sum.hpp"

namespace oar {

using MathOps = op_list_concat<BinaryOps, ReduceOps,
                               op_list<ops::Sum, ops::Mean, ops::Scale, ops::Sign, ops::ClipByNorm, ops::SquaredL2Norm,
                                       ops::Matmul, ops::FillZerosLike>>::type;

}  // namespace oar
