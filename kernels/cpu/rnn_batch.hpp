// kernels/cpu/rnn_batch.hpp: what the recurrent kernels on the CPU share: the row gathers between the sequence
// layout and Fluid's batch layout (kernels/common/rnn_batch.hpp, time step t of every sequence in one block of
// rows, so that one gemm serves a whole step), and the cell activations with their derivatives (vectorizable
// loops; f32 uses a polynomial exp accurate to ~1 ulp, f64 the standard library).
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>

#include "kernels/common/rnn_batch.hpp"
#include "kernels/cpu/gemm.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"
#include "oar/ops/rnn_common.hpp"

namespace oar::cpu_kernels::rnn {

using namespace kernels::rnn;

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
