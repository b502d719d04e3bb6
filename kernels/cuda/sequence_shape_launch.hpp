// kernels/cuda/sequence_shape_launch.hpp: the launchers sequence_shape.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

// the row copies of sequence_concat, sequence_pad / unpad, sequence_slice and
// sequence_expand (and the gradients that copy), and sequence_mask. Plans are int64 arrays on the device.
/// For i in [0, rows): out row (dst_rows ? dst_rows[i] : i) = x row (src_rows ? src_rows[i] : i), rows of D
/// elements of `bytes` each (1, 2, 4 or 8: any dtype); a negative src_rows[i] writes a fill row instead:
/// fill[d % fill_D] at column d (fill_D 1: one value for every column; D: a whole row), zeros for a null fill.
/// requires: the rows written are distinct, and out overlaps neither x nor fill.
int copy_rows(int bytes, const void* x, const int64_t* src_rows, void* out, const int64_t* dst_rows, int64_t rows, int64_t D, const void* fill,
              int64_t fill_D, Stream s);
/// y [n, m]: y[i, j] = one (the value's bytes, as fill's pattern) where j < len[i], else all-zero bytes; len i32
/// or i64 (`len_type`), y of `bytes` bytes per element (1, 2, 4 or 8).
int sequence_mask(Elem len_type, const void* len, int bytes, uint64_t one, void* y, int64_t n, int64_t m, Stream s);

}  // namespace oar::cuda_kernels
