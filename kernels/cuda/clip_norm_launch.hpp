// kernels/cuda/clip_norm_launch.hpp: the launchers clip_norm.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

// what clipping by norm or global norm and L1 decay add to an update program (the CPU's semantics)
/// out[0] = sum(x^2) over n elements (f32, f64), summed in double in a fixed order (the same bits every run);
/// `scratch`: squared_l2_norm_scratch_bytes(n).
int squared_l2_norm(Elem t, const void* x, void* out, int64_t n, void* scratch, Stream s);
inline size_t squared_l2_norm_scratch_bytes(int64_t n) { return channel_scratch_bytes(n, 1, 1, 1); }
/// dx = 2 dout[0] x (f32, f64).
int squared_l2_norm_grad(Elem t, const void* x, const void* dout, void* dx, int64_t n, Stream s);
/// out = x max_norm / max(||x||_2, max_norm) (f32, f64; the norm as squared_l2_norm's). In place allowed.
/// `scratch`: clip_by_norm_scratch_bytes(n) (the sum's pieces, then the factor).
int clip_by_norm(Elem t, const void* x, void* out, int64_t n, double max_norm, void* scratch, Stream s);
inline size_t clip_by_norm_scratch_bytes(int64_t n) { return channel_scratch_bytes(n, 1, 1, 1) + sizeof(double); }
/// out = 1 for x > 0, -1 for x < 0, else x (0, -0, NaN) (f32, f64, i32, i64). In place allowed.
int sign(Elem t, const void* x, void* out, int64_t n, Stream s);

}  // namespace oar::cuda_kernels
