// kernels/cuda/logic_launch.hpp: the launchers logic.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

// the comparison and logical ops, one_hot and sigmoid_cross_entropy_with_logits (the CPU's semantics).
/// The comparisons of ops/compare.hpp's OAR_COMPARE_OPS and its two-input logical ops (OAR_LOGICAL_BINARY_OPS),
/// by op type; logic.cu applies the std:: functor each list line names.
enum class Compare : int { less_than, less_equal, greater_than, greater_equal, equal, not_equal };
enum class Logical : int { logical_and, logical_or, logical_xor };
/// out[i] (bool) = cmp(x[i], y[j]) with y broadcast over x as `b` (f32, f64, i32, i64).
int compare(Compare op, Elem t, const Broadcast& b, const void* x, const void* y, bool* out, Stream s);
/// out[i] = f(x[i], y[i]) for n bools. In place allowed.
int logical(Logical op, const bool* x, const bool* y, bool* out, int64_t n, Stream s);
/// out [n, depth] of type `t` (f32, f64, i32, i64): 1 at [i, label[i]], 0 elsewhere; labels of type `label_t`
/// (i32, i64), each already checked to lie in [0, depth).
int one_hot(Elem t, Elem label_t, const void* label, void* out, int64_t n, int64_t depth, Stream s);
/// out = max(x, 0) - x label + log1p(exp(-|x|)), 0 where label == ignore_index (f32, f64). out may be x or label.
int sigmoid_cross_entropy(Elem t, const void* x, const void* label, void* out, int64_t n, int ignore_index, Stream s);
/// dx = (sigmoid(x) - label) dout (sigmoid from exp(-|x|)), 0 where label == ignore_index. dx may be dout.
int sigmoid_cross_entropy_grad(Elem t, const void* x, const void* label, const void* dout, void* dx, int64_t n, int ignore_index, Stream s);

}  // namespace oar::cuda_kernels
