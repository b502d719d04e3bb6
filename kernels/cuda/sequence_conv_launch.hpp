// kernels/cuda/sequence_conv_launch.hpp: the launchers sequence_conv.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

// sequence_conv's context columns (the CPU's semantics; f32, f64). `offsets`: S + 1 on the device.
/// col [N, len * D]: col[r, j * D + k] = x[r + start + j, k] when that row lies in r's sequence, else 0.
int sequence_context(Elem t, const void* x, const int64_t* offsets, void* col, int64_t N, int64_t S, int64_t D, int start, int len, Stream s);
/// dx [N, D]: dx[u, k] = the sum over j = 0, 1, ... of dcol[u - start - j, j * D + k] for the rows u - start - j
/// inside u's sequence (the CPU's order).
int sequence_context_grad(Elem t, const void* dcol, const int64_t* offsets, void* dx, int64_t N, int64_t S, int64_t D, int start, int len, Stream s);

}  // namespace oar::cuda_kernels
