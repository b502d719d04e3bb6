// kernels/cuda/layer_norm_launch.hpp: the launchers layer_norm.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

// layer_norm over x as [rows, k] (k: the dims from begin_norm_axis on), the CPU kernel's semantics.
/// Per row: mean and biased variance in double (two passes), y = (x - mean) istd scale + bias in T, with
/// istd = 1 / sqrt(var + eps); scale, bias [k] may be null. y may be x.
int layer_norm_forward(Elem t, const void* x, const void* scale, const void* bias, void* y, void* mean, void* var, int64_t rows, int64_t k,
                       double epsilon, Stream s);
/// From the forward's mean and variance: dx = istd (g - mean(g) - xhat mean(g xhat)) with g = dy scale (scale may
/// be null: 1); dscale = sum over rows of dy xhat, dbias = sum over rows of dy (in double, a fixed order). dx,
/// dscale, dbias may each be null. `scratch`: layer_norm_scratch_bytes(rows, k).
int layer_norm_backward(Elem t, const void* x, const void* dy, const void* scale, const void* mean, const void* var, void* dx, void* dscale,
                        void* dbias, int64_t rows, int64_t k, double epsilon, void* scratch, Stream s);
/// Each row's istd, then the column sums' pieces.
inline size_t layer_norm_scratch_bytes(int64_t rows, int64_t k) { return size_t(rows) * sizeof(double) + channel_scratch_bytes(rows, k, 1, 2); }

}  // namespace oar::cuda_kernels
