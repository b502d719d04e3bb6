// kernels/cuda/nn_launch.hpp: the launchers nn.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

/// out[r] = -log(x[r, label[r]]) for hard labels (i64), 0 where label == ignore_index, NaN for a label outside
/// [0, cols) (the CPU's oar::Error for it would need the labels on the host, a copy every step);
/// `soft`: label is [rows, cols] of x's type and out[r] = -sum_j label[r, j] log(x[r, j]). -log(0) is taken as
/// 1e20, as the CPU kernel does.
int cross_entropy(Elem t, bool soft, const void* x, const void* label, void* out, int64_t rows, int64_t cols, int64_t ignore_index, Stream s);
/// dx[r, j] = -dout[r] / x[r, label[r]] at the label, 0 elsewhere (hard); -dout[r] label[r, j] / x[r, j] (soft).
int cross_entropy_grad(Elem t, bool soft, const void* x, const void* label, const void* dout, void* dx, int64_t rows, int64_t cols,
                       int64_t ignore_index, Stream s);
/// softmax_with_cross_entropy of logits x [rows, cols]: sm = softmax(x) per row, loss[r] = lse - (x[r, label] - max)
/// for hard i64 labels (0 at ignore_index, NaN outside [0, cols)), or sum_j label[r, j] (lse - (x[r, j] - max)) (soft).
int softmax_cross_entropy(Elem t, bool soft, const void* x, const void* label, void* sm, void* loss, int64_t rows, int64_t cols, int64_t ignore_index,
                          Stream s);
/// dx = (sm - onehot(label)) dloss per row (hard; 0 at ignore_index), or (sm sum(label) - label) dloss (soft).
int softmax_cross_entropy_grad(Elem t, bool soft, const void* sm, const void* label, const void* dloss, void* dx, int64_t rows, int64_t cols,
                               int64_t ignore_index, Stream s);
/// dropout in training: keep_i = (draw i of the counter stream of `seed`) >= p; out = x keep scale; mask = keep
/// (may be null). The CPU kernel draws the same stream, so a seed gives the same mask on both.
int dropout(Elem t, const void* x, void* out, void* mask, int64_t n, uint64_t seed, double p, double scale, Stream s);
/// lookup_table: out[i] = w[ids[i]] ([n, d] rows), zeros at `pad`, NaN for an id outside [0, v) (the CPU's
/// oar::Error would need the ids on the host).
int lookup_rows(Elem t, const void* w, const int64_t* ids, void* out, int64_t n, int64_t d, int64_t v, int64_t pad, Stream s);
/// Its dense gradient: dw = zeros [v, d], dw[ids[i]] += dout[i] in the order of i (one thread per column, as the
/// CPU kernel sums, so the result is the CPU's), skipping `pad` and ids outside [0, v).
int lookup_rows_grad(Elem t, const int64_t* ids, const void* dout, void* dw, int64_t n, int64_t d, int64_t v, int64_t pad, Stream s);
/// The k largest of each row of x [rows, cols] (f32, f64, i32, i64), largest first (NaN before numbers, equal
/// values by index, as the CPU kernel orders them): out [rows, k] of x's type, indices [rows, k] i64.
int top_k(Elem t, const void* x, void* out, int64_t* indices, int64_t rows, int64_t cols, int64_t k, Stream s);
/// out[r] (i64) = the index along the middle dim of x seen as [outer, n, inner] of the largest (`max`) or the
/// smallest element, the first on ties; NaN wins both, as on the CPU.
int arg_reduce(Elem t, bool max, const void* x, int64_t* out, int64_t outer, int64_t n, int64_t inner, Stream s);
/// accuracy of indices [rows, k] (i64) against labels [rows] (i64, or i32 when `label_i32`): a row is correct
/// when one of its k indices is its label. Writes accuracy (f32 [1]), correct and total (i32 [1]).
int accuracy(const int64_t* indices, const void* label, bool label_i32, int64_t rows, int64_t k, float* accuracy, int32_t* correct, int32_t* total,
             Stream s);

}  // namespace oar::cuda_kernels
