// kernels/cuda/amp_launch.hpp: the launchers amp.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

// dynamic loss scaling (ops/amp.hpp) and logical_not.
/// out[i] = x[i] / scale[0] (x and out may be the same); *found set to true when some x[i] is inf or NaN (it is
/// only ever set, never cleared: the caller clears it once before the first tensor).
int unscale_and_check(Elem t, const void* x, void* out, int64_t n, const float* scale, bool* found, Stream s);
/// update_loss_scaling's rule (kernels/loss_scale.hpp) on the device's one-value tensors.
int update_loss_scaling(const bool* found, const float* prev, const int32_t* good_in, const int32_t* bad_in, float* scale, int32_t* good, int32_t* bad,
                        int32_t incr_every, int32_t decr_every, float incr_ratio, float decr_ratio, Stream s);
/// out[i] = !x[i].
int logical_not(const bool* x, bool* out, int64_t n, Stream s);

}  // namespace oar::cuda_kernels
