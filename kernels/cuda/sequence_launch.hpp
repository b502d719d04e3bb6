// kernels/cuda/sequence_launch.hpp: the launchers sequence.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

// sequence_pool, sequence_softmax, sequence_expand and their gradients (the CPU's semantics).
/// The pool types of ops::SequencePool::PoolType, in its order.
enum class SeqPool : int { average, sum, sqrt, max, last, first };
/// out[s, d] = pool of x rows [off[s], off[s+1]) at column d, D columns (f32, f64); an empty sequence gives 0 (and
/// max_index -1); max_index (i32, out's size) is written for max alone and may be null. `offsets`: S + 1 on the device.
int sequence_pool(SeqPool type, Elem t, const void* x, const int64_t* offsets, void* out, int32_t* max_index, int64_t S, int64_t D, Stream s);
/// dx [N, D] from dout [S, D]: spread (/1, /len, /sqrt(len)) or given to the row first / last / max_index names, 0
/// elsewhere; max_index (already checked to lie inside each sequence) read for max alone.
int sequence_pool_grad(SeqPool type, Elem t, const void* dout, const int32_t* max_index, const int64_t* offsets, void* dx, int64_t N, int64_t S, int64_t D,
                       Stream s);
/// out = softmax of x inside each sequence [off[s], off[s+1]) of a column (f32, f64); empty sequences write nothing.
int sequence_softmax(Elem t, const void* x, const int64_t* offsets, void* out, int64_t S, Stream s);
/// dx = y (dy - sum over the sequence of dy y).
int sequence_softmax_grad(Elem t, const void* y, const void* dy, const int64_t* offsets, void* dx, int64_t S, Stream s);
/// (sequence_expand's forward is a copy_rows, below.)
/// dx row r (M rows of D, f32, f64) = the sum, from 0 in j's order, of dout rows plan[3r] + j plan[3r+2] for j < plan[3r+1].
int sequence_expand_grad(Elem t, const void* dout, const int64_t* plan, void* dx, int64_t M, int64_t D, Stream s);

}  // namespace oar::cuda_kernels
