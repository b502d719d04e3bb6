// kernels/cpu/rnn_batch.hpp: what the recurrent kernels on the CPU share: the row gathers between the sequence
// layout and Fluid's batch layout (kernels/common/rnn_batch.hpp, time step t of every sequence in one block of
// rows, so that one gemm serves a whole step), and loops of the cell activations and their derivatives
// (kernels/rnn_math.hpp's formulas, one vectorizable loop per activation).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>

#include "kernels/common/rnn_batch.hpp"
#include "kernels/cpu/gemm.hpp"
#include "kernels/rnn_math.hpp"
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

// ---- activations: the formulas are kernels/rnn_math.hpp's (the CUDA kernels call the same ones); here each
// activation gets a loop of its own, so that the compiler vectorizes it.

/// x[0..n) = act(x[0..n)).
template <class T>
inline void act_forward(RnnAct a, T* __restrict x, int64_t n) {
  switch (a) {
    case RnnAct::identity: return;
    case RnnAct::sigmoid:
      for (int64_t j = 0; j < n; ++j) x[j] = fn::rnn::sigmoid(x[j]);
      return;
    case RnnAct::tanh:
      for (int64_t j = 0; j < n; ++j) x[j] = fn::rnn::tanh(x[j]);
      return;
    case RnnAct::relu:
      for (int64_t j = 0; j < n; ++j) x[j] = fn::rnn::relu(x[j]);
      return;
  }
}

/// d[0..n) *= act'(.), from the activation's outputs y.
template <class T>
inline void act_backward(RnnAct a, const T* __restrict y, T* __restrict d, int64_t n) {
  switch (a) {
    case RnnAct::identity: return;
    case RnnAct::sigmoid:
      for (int64_t j = 0; j < n; ++j) d[j] = fn::rnn::act_grad(fn::rnn::kSigmoid, y[j], d[j]);
      return;
    case RnnAct::tanh:
      for (int64_t j = 0; j < n; ++j) d[j] = fn::rnn::act_grad(fn::rnn::kTanh, y[j], d[j]);
      return;
    case RnnAct::relu:
      for (int64_t j = 0; j < n; ++j) d[j] = fn::rnn::act_grad(fn::rnn::kRelu, y[j], d[j]);
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
