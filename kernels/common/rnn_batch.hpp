// kernels/common/rnn_batch.hpp: Fluid's batch layout of a LoD tensor's sequences (time step t of every sequence
// in one block of rows, so that one product serves a whole step), planned on the host for the recurrent kernels
// of every place.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string_view>

#include "kernels/common/scratch.hpp"
#include "kernels/rnn_math.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/ops/rnn_common.hpp"

namespace oar::kernels::rnn {

static_assert(int(RnnAct::identity) == fn::rnn::kIdentity && int(RnnAct::sigmoid) == fn::rnn::kSigmoid && int(RnnAct::tanh) == fn::rnn::kTanh &&
                  int(RnnAct::relu) == fn::rnn::kRelu,
              "the kernels pass RnnAct to kernels/rnn_math.hpp as these codes");

// thread_scratch slots of the recurrent kernels (70..89; one kernel uses each at most once at a time).
inline constexpr int kLayoutSlot = 70;  // int64_t, 71..73 too

/// Fluid's batch layout of S sequences: sorted by length, longest first (stable), step t of the k_t
/// sequences longer than t lies in batch rows [step_begin[t], step_begin[t+1]), the i-th longest at
/// step_begin[t] + i. Since k_t never grows with t, the first k_t rows of step t - 1 are the same sequences
/// in the same order: h_{t-1} of step t is one contiguous block, and so is every step's gemm.
/// ensures: the arrays are this thread's scratch, valid until the next make_batch_layout on it.
struct BatchLayout {
  int64_t rows = 0;               ///< T, the rows of both layouts
  int64_t seqs = 0;               ///< S
  int64_t steps = 0;              ///< the longest length
  const int64_t* step_begin = nullptr;  ///< [steps + 1]
  const int64_t* row_of = nullptr;      ///< [T]: batch row -> row in the sequence layout
  const int64_t* order = nullptr;       ///< [S]: order[i] = the i-th longest sequence (its index in the LoD)
  int64_t active(int64_t t) const { return step_begin[t + 1] - step_begin[t]; }
  /// The batch row of the previous step of batch row `b` of step t >= 1.
  int64_t prev_row(int64_t t, int64_t b) const { return step_begin[t - 1] + (b - step_begin[t]); }
};

/// The batch layout of the sequences `offsets` (a LoD level over `rows` rows); with `reverse` step t of a
/// sequence of length n is its row n - 1 - t.
inline BatchLayout make_batch_layout(std::span<const size_t> offsets, int64_t rows, bool reverse) {
  BatchLayout l;
  l.rows = rows;
  l.seqs = int64_t(offsets.size()) - 1;
  for (int64_t s = 0; s < l.seqs; ++s) l.steps = std::max<int64_t>(l.steps, int64_t(offsets[s + 1] - offsets[s]));
  // Counting sort by length, descending and stable: no allocation (std::stable_sort may allocate).
  int64_t* count = thread_scratch<int64_t, kLayoutSlot>(size_t(l.steps + 2));
  int64_t* order = thread_scratch<int64_t, kLayoutSlot + 1>(size_t(std::max<int64_t>(l.seqs, 1)));
  int64_t* begin = thread_scratch<int64_t, kLayoutSlot + 2>(size_t(l.steps + 1));
  int64_t* row_of = thread_scratch<int64_t, kLayoutSlot + 3>(size_t(std::max<int64_t>(rows, 1)));
  std::fill(count, count + l.steps + 2, int64_t(0));
  for (int64_t s = 0; s < l.seqs; ++s) ++count[offsets[s + 1] - offsets[s]];
  // count[n] -> first sorted position of the sequences of length n; meanwhile begin[t] = #sequences longer than t.
  int64_t pos = 0;
  for (int64_t n = l.steps; n >= 0; --n) {
    const int64_t c = count[n];
    count[n] = pos;
    pos += c;
    if (n >= 1) begin[n - 1] = pos;  // sequences of length >= n, i.e. longer than n - 1
  }
  for (int64_t s = 0; s < l.seqs; ++s) order[count[offsets[s + 1] - offsets[s]]++] = s;
  // begin[t] holds k_t now; turn it into offsets.
  int64_t acc = 0;
  for (int64_t t = 0; t < l.steps; ++t) {
    const int64_t k = begin[t];
    begin[t] = acc;
    acc += k;
  }
  begin[l.steps] = acc;
  for (int64_t t = 0; t < l.steps; ++t)
    for (int64_t i = 0, k = begin[t + 1] - begin[t]; i < k; ++i) {
      const int64_t s = order[i];
      const int64_t n = int64_t(offsets[s + 1] - offsets[s]);
      row_of[begin[t] + i] = int64_t(offsets[s]) + (reverse ? n - 1 - t : t);
    }
  l.step_begin = begin;
  l.row_of = row_of;
  l.order = order;
  return l;
}

/// The last LoD level of `t` (input slot `slot` of the kernel), checked: present, starting at 0, ending at
/// t's rows.
inline std::span<const size_t> sequence_offsets(const KernelContext& c, const LoDTensor& t, std::string_view slot) {
  c.check(!t.lod().empty() && !t.lod().back().empty(), "{} {} needs a LoD (its sequences), got none", slot, t.shape());
  const auto& off = t.lod().back();
  c.check(off.front() == 0 && int64_t(off.back()) == t.dim(0), "{}: the LoD's last level must run from 0 to its {} rows, got [{} .. {}]", slot,
          t.dim(0), off.front(), off.back());
  return {off.data(), off.size()};
}

/// The batch layout of `t`'s sequences (input slot `slot`), checked as sequence_offsets does.
inline BatchLayout layout_of(const KernelContext& c, const LoDTensor& t, std::string_view slot, bool reverse) {
  return make_batch_layout(sequence_offsets(c, t, slot), t.dim(0), reverse);
}

/// A sequence RNN's Weight [D, gates D] and projected Input [T, gates D], checked (gates: 3 for gru, 4 for
/// lstm); returns D.
inline int64_t check_projected(const KernelContext& c, const LoDTensor& x, const LoDTensor& w, int gates) {
  const int64_t d = w.dim(0);
  c.check(w.rank() == 2 && w.dim(1) == gates * d, "Weight must be [D, {}D], got {}", gates, w.shape());
  c.check(x.rank() == 2 && x.dim(1) == gates * d, "Input must be [T, {}], got {}", gates * d, x.shape());
  return d;
}

/// The optional initial states `states` (H0, C0; null when absent), checked: each [S, D] for the layout's S
/// sequences. `what` names them in the message.
inline void check_initial_states(const KernelContext& c, std::initializer_list<const LoDTensor*> states, const BatchLayout& l, int64_t d,
                                 std::string_view what) {
  for (const LoDTensor* s : states)
    if (s)
      c.check(s->rank() == 2 && s->dim(0) == l.seqs && s->dim(1) == d, "{} must be [S, D] = [{}, {}] for {} sequences, got {}", what, l.seqs, d, l.seqs,
              s->shape());
}

}  // namespace oar::kernels::rnn
