// kernels/cuda/attention_launch.hpp: the launchers attention.cu defines (what they share and how they report: launch.hpp).
#pragma once
#include "kernels/cuda/launch.hpp"

namespace oar::cuda_kernels {

/// One attention problem (a batch entry's or a sequence's head): element offsets of its first row from the
/// bases passed beside it, and row strides (as kernels/common/attention.hpp lays them out).
struct AttnProblem {
  int64_t q, k, v, o, lse, mask;  ///< mask: -1 for none
  int64_t tq, tk, qs, ks, vs, os, lse_stride;
  uint64_t draw0;  ///< the dropout draw of element (0, 0)
};
/// What every problem of a call shares. `rng_key`: fn::CounterRng's key for the dropout draws.
struct AttnShared {
  int64_t d = 0, dv = 0;
  double scale = 1, dropout = 0;
  uint64_t rng_key = 0;
  bool causal = false, mask_bool = false;
};
/// Forward of `count` problems (`problems` in device memory); a block per query row, up to `max_tq` rows each.
int attention_forward(Elem t, const AttnProblem* problems, int64_t count, int64_t max_tq, const AttnShared& sh, const void* q, const void* k,
                      const void* v, const void* mask, void* o, void* lse, Stream s);
/// Backward: dq written, dk and dv added to (zero them first).
int attention_backward(Elem t, const AttnProblem* problems, int64_t count, int64_t max_tq, const AttnShared& sh, const void* q, const void* k,
                       const void* v, const void* mask, const void* o, const void* dout, const void* lse, void* dq, void* dk, void* dv, Stream s);
/// add_position_encoding over `rows` rows of `width` features (pos: each row's position, int64 on the device).
int add_position_encoding(Elem t, const void* x, void* out, const int64_t* pos, int64_t rows, int64_t width, float alpha, float beta, Stream s);
/// x * alpha (the gradient of add_position_encoding).
int scale_by(Elem t, const void* x, void* out, int64_t n, float alpha, Stream s);
/// rotary_position_embedding (sign 1) or its gradient (sign -1) over `rows` rows of `heads` heads of `d`
/// features; `heads_inner`: the heads of a row are adjacent (LoD [N, H, d]), else each row is one head.
int rotary(Elem t, const void* x, void* out, const int64_t* pos, int64_t rows, int64_t heads, int64_t d, float base, int64_t offset, float sign,
           Stream s);

}  // namespace oar::cuda_kernels
