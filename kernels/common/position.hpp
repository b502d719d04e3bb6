// kernels/common/position.hpp: each row's position in its sequence (its index in a dense batch, its row in its
// LoD sequence otherwise, plus the op's Offset), and the checked layouts that add_position_encoding's and
// rotary_position_embedding's kernels on every place start from.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/common/place_io.hpp"
#include "kernels/common/sequence_pool.hpp"
#include "oar/ops/position.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels::position {

/// The position of each row of X (rows: every dim but the last `inner` ones), from its LoD or, dense, from dim
/// `time_dim` (rows of a dense X run b, [h,] t in order; `heads` > 1 repeats each position for the heads), plus
/// the op's Offset of the row's sequence (or dense batch row) when it has one.
inline std::vector<int64_t> row_positions(const KernelContext& c, Slot slot, const LoDTensor& x, bool dense, int64_t time_len, int64_t heads_inner) {
  const Slot offset_slot = ops::AddPositionEncoding::offset;  // rotary_position_embedding's Offset is the same slot
  std::vector<int64_t> pos, first;
  const size_t S = dense ? size_t(x.dim(0)) : seq_last_level(c, slot, x).size() - 1;
  if (c.has_in(offset_slot)) {
    const Tensor h = place_io::host(c, c.in(offset_slot));
    c.check(h.dtype() == DType::i64 && size_t(h.numel()) == S, "Offset must be int64 with one value per {} ({}), got {} {}", dense ? "batch row" : "sequence", S,
            name(h.dtype()), h.shape());
    first.assign(h.data<int64_t>(), h.data<int64_t>() + S);
  } else {
    first.assign(S, 0);
  }
  if (dense) {  // [.., T] rows: position = row % T
    const int64_t rows = x.numel() / heads_inner;
    const int64_t per_b = S ? rows / int64_t(S) : 1;
    pos.resize(size_t(rows));
    for (int64_t r = 0; r < rows; ++r) pos[size_t(r)] = (time_len > 0 ? r % time_len : 0) + first[size_t(r / std::max<int64_t>(per_b, 1))];
    return pos;
  }
  const std::span<const size_t> seq = seq_last_level(c, slot, x);
  pos.resize(size_t(x.dim(0)));
  for (size_t s = 0; s + 1 < seq.size(); ++s)
    for (size_t r = seq[s]; r < seq[s + 1]; ++r) pos[r] = int64_t(r - seq[s]) + first[s];
  return pos;
}

/// What rotary_position_embedding's kernels on both places start from: X's layout checked, each row's
/// position, and the result `o` sized as X with its LoD.
struct RotaryLayout {
  bool dense;
  int64_t heads, d;
  std::vector<int64_t> pos;
};
inline RotaryLayout rotary_layout(const KernelContext& c, const LoDTensor& pos_of, const LoDTensor& in, LoDTensor& o) {
  using R = ops::RotaryPositionEmbedding;
  RotaryLayout l;
  l.dense = pos_of.rank() == 4;
  c.check(l.dense || pos_of.rank() == 3, "X must be [B, H, T, d] or [N, H, d] with a LoD, got {}", pos_of.shape());
  c.check(in.numel() == pos_of.numel(), "Out@GRAD {} must have X's shape {}", in.shape(), pos_of.shape());
  l.d = pos_of.dim(pos_of.rank() - 1);
  c.check(l.d % 2 == 0, "the head size d of X {} must be even", pos_of.shape());
  l.heads = l.dense ? 1 : pos_of.dim(1);
  l.pos = row_positions(c, R::x, pos_of, l.dense, l.dense ? pos_of.dim(2) : 0, l.dense ? l.d : l.heads * l.d);
  o.resize(pos_of.shape(), in.dtype());
  o.set_lod(pos_of.lod());
  return l;
}

/// What add_position_encoding's kernels on both places start from: X's layout checked, each row's position,
/// the feature size D, and Out sized as X with its LoD.
struct EncodingLayout {
  int64_t D;
  std::vector<int64_t> pos;
};
inline EncodingLayout encoding_layout(const KernelContext& c, const LoDTensor& xt, LoDTensor& ot) {
  using P = ops::AddPositionEncoding;
  const bool dense = xt.rank() == 3;
  c.check(dense || xt.rank() == 2, "X must be [B, T, D] or [N, D] with a LoD, got {}", xt.shape());
  EncodingLayout l;
  l.D = xt.dim(xt.rank() - 1);
  c.check(l.D % 2 == 0, "the feature size D of X {} must be even", xt.shape());
  l.pos = row_positions(c, P::x, xt, dense, dense ? xt.dim(1) : 0, l.D);
  ot.resize(xt.shape(), xt.dtype());
  ot.set_lod(xt.lod());
  return l;
}

}  // namespace oar::kernels::position
