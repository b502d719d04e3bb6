// kernels/cpu/rnn_batch.hpp: what the recurrent kernels share: Fluid's batch layout of a LoD tensor's
// sequences (time step t of every sequence in one block of rows, so that one gemm serves a whole step), the
// row gathers between the two layouts, and the cell activations with their derivatives (vectorizable loops;
// f32 uses a polynomial exp accurate to ~1 ulp, f64 the standard library).
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>

#include "kernels/cpu/gemm.hpp"
#include "kernels/cpu/im2col.hpp"  // thread_scratch
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"
#include "oar/ops/rnn_common.hpp"

namespace oar::cpu_kernels::rnn {

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

/// Rows (`width` wide) picked by an index: dst[i] = src[idx[i]] (`gather`) or dst[idx[i]] = src[i].
template <class T>
void gather_rows(T* dst, const T* src, const int64_t* idx, int64_t n, int64_t width) {
  parallel_for(0, n, std::max<int64_t>(1, 8192 / std::max<int64_t>(width, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) std::memcpy(dst + i * width, src + idx[i] * width, size_t(width) * sizeof(T));
  });
}
template <class T>
void scatter_rows(T* dst, const T* src, const int64_t* idx, int64_t n, int64_t width) {
  parallel_for(0, n, std::max<int64_t>(1, 8192 / std::max<int64_t>(width, 1)), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) std::memcpy(dst + idx[i] * width, src + i * width, size_t(width) * sizeof(T));
  });
}

/// h_{t-1} of every batch row into `out` [T, D] (the weight gradient's gemm operand) from h in the sequence
/// layout `hs` and, for step 0, `h0` [S, D] in LoD order (rows of step 0 are left alone without it).
template <class T>
T* previous_hidden(const BatchLayout& l, const T* hs, const T* h0, int64_t d, T* out) {
  if (l.steps == 0) return out;
  if (h0) gather_rows(out, h0, l.order, l.active(0), d);
  parallel_for(l.step_begin[1], l.rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(d, 1)), [&](int64_t lo, int64_t hi) {
    // Find the step of row lo, then walk.
    int64_t t = int64_t(std::upper_bound(l.step_begin, l.step_begin + l.steps + 1, lo) - l.step_begin) - 1;
    for (int64_t r = lo; r < hi; ++r) {
      while (r >= l.step_begin[t + 1]) ++t;
      std::memcpy(out + r * d, hs + l.row_of[l.prev_row(t, r)] * d, size_t(d) * sizeof(T));
    }
  });
  return out;
}

/// The gradient of an initial state [S, D] in LoD order from its rows in the sorted order (`sorted`, the
/// first k_0 sequences); the empty sequences' rows get zeros.
template <class T>
void unsort_initial(const BatchLayout& l, const T* sorted, LoDTensor* out, int64_t d, DType dtype) {
  out->resize(Shape{l.seqs, d}, dtype);
  T* o = out->data<T>();
  const int64_t k0 = l.steps > 0 ? l.active(0) : 0;
  for (int64_t i = k0; i < l.seqs; ++i) std::fill(o + l.order[i] * d, o + (l.order[i] + 1) * d, T(0));
  scatter_rows(o, sorted, l.order, k0, d);
}

/// Rows per parallel chunk of a per-row pass over `width` values a row.
inline int64_t row_grain(int64_t width) { return std::max<int64_t>(1, 16384 / std::max<int64_t>(width, 1)); }

// ---- activations

/// exp(x) for floats: Cephes' expf (degree-6 polynomial on [-ln2/2, ln2/2] times 2^n), branch-free so that
/// loops over it vectorize; relative error ~1e-7, inputs clamped to [-87, 88].
/// NOTE: n is rounded by adding 1.5 * 2^23 (the sum's low mantissa bits then hold n), not with std::floor:
/// GCC does not vectorize floor under the default -ftrapping-math, which left these loops scalar.
inline float exp_approx(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const float n = shifted - 12582912.0f;
  const int32_t ni = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(12582912.0f);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<float>((ni + 127) << 23);
}
inline double exp_approx(double x) { return std::exp(x); }

template <class T> inline T sigmoid(T x) { return T(1) / (T(1) + exp_approx(-x)); }
/// tanh(x) = 2 sigmoid(2x) - 1 for floats (absolute error ~1e-7); std::tanh for doubles.
inline float tanh_approx(float x) { return 2.0f / (1.0f + exp_approx(-2.0f * x)) - 1.0f; }
inline double tanh_approx(double x) { return std::tanh(x); }

/// x[0..n) = act(x[0..n)).
template <class T>
inline void act_forward(RnnAct a, T* __restrict x, int64_t n) {
  switch (a) {
    case RnnAct::identity: return;
    case RnnAct::sigmoid:
      for (int64_t j = 0; j < n; ++j) x[j] = sigmoid(x[j]);
      return;
    case RnnAct::tanh:
      for (int64_t j = 0; j < n; ++j) x[j] = tanh_approx(x[j]);
      return;
    case RnnAct::relu:
      for (int64_t j = 0; j < n; ++j) x[j] = x[j] > T(0) ? x[j] : T(0);
      return;
  }
}

/// d[0..n) *= act'(.), from the activation's outputs y.
template <class T>
inline void act_backward(RnnAct a, const T* __restrict y, T* __restrict d, int64_t n) {
  switch (a) {
    case RnnAct::identity: return;
    case RnnAct::sigmoid:
      for (int64_t j = 0; j < n; ++j) d[j] *= y[j] * (T(1) - y[j]);
      return;
    case RnnAct::tanh:
      for (int64_t j = 0; j < n; ++j) d[j] *= T(1) - y[j] * y[j];
      return;
    case RnnAct::relu:
      for (int64_t j = 0; j < n; ++j) d[j] = y[j] > T(0) ? d[j] : T(0);
      return;
  }
}

/// Sums of the columns of a [rows, width] matrix with leading dimension ld into out[0..width) (`beta` 0 or 1).
template <class T>
void column_sums(const T* m, int64_t rows, int64_t width, int64_t ld, T* out, bool accumulate) {
  if (!accumulate) std::fill(out, out + width, T(0));
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = m + r * ld;
    for (int64_t j = 0; j < width; ++j) out[j] += row[j];
  }
}

}  // namespace oar::cpu_kernels::rnn
