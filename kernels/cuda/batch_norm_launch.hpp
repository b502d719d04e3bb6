// kernels/cuda/batch_norm_launch.hpp: the launchers batch_norm.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

// batch_norm over x as [n, c, s] (s: the spatial size), the CPU kernel's semantics.
/// y = (x - mean) istd scale + bias with the batch statistics (or, `global`, mean_in / var_in); writes the
/// running statistics (mean_out / var_out, may be mean_in / var_in or null), saved mean and inverse std (may be
/// null); ka, kb: scratch of c values; `scratch`: batch_norm_scratch_bytes(n, c, s).
int batch_norm_forward(Elem t, const void* x, void* y, const void* scale, const void* bias, const void* mean_in, const void* var_in, void* mean_out,
                       void* var_out, void* saved_mean, void* saved_istd, void* ka, void* kb, int64_t n, int64_t c, int64_t s, float momentum,
                       double epsilon, bool global, void* scratch, Stream st);
/// dx (may be null), dscale = sum(dy xhat), dbias = sum(dy) (either may be null) from the saved statistics.
int batch_norm_backward(Elem t, const void* x, const void* dy, const void* scale, const void* saved_mean, const void* saved_istd, void* dx, void* dscale,
                        void* dbias, int64_t n, int64_t c, int64_t s, bool global, void* scratch, Stream st);
/// The device scratch either pass needs: two sums per channel, then two factors per channel.
inline size_t batch_norm_scratch_bytes(int64_t n, int64_t c, int64_t s) { return channel_scratch_bytes(n, c, s, 2) + size_t(c) * 2 * sizeof(double); }

}  // namespace oar::cuda_kernels
