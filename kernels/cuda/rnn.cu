// kernels/cuda/rnn.cu: the device kernels of lstm, gru, lstm_unit, gru_unit and their gradients (kernels/cuda/rnn.hpp
// is the host side, which runs the products h_{t-1} W on cuBLAS between these launches). Each kernel is the CPU
// kernel's per-row pass with one thread per element (kernels/cpu/lstm.hpp forward_row / backward_row, gru.hpp
// forward_step / backward_step, lstm_unit.hpp); the activations and lstm_unit's formulas are kernels/rnn_math.hpp's,
// which the CPU kernels call too. The column sums of the bias and peephole gradients go through channel_sum.cuh
// (double, a fixed order).
// Launched through kernels/cuda/rnn_launch.hpp.
#include <cstdint>

#include "kernels/cuda/channel_sum.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/rnn_launch.hpp"
#include "kernels/rnn_math.hpp"

namespace oar::cuda_kernels {

namespace {

using fn::rnn::act;
using fn::rnn::act_grad;

template <class T>
__global__ void gate_inputs_kernel(const T* x, const int64_t* row_of, const T* bias, T* out, int64_t rows, int64_t w) {
  OAR_GRID_STRIDE(e, rows * w) {
    const int64_t r = e / w, j = e - r * w;
    const T v = x[(row_of ? row_of[r] : r) * w + j];
    out[e] = bias ? v + bias[j] : v;
  }
}

/// column j's sum of m [rows, c].
template <class T>
struct ColumnTerm {
  const T* m;
  __device__ void operator()(int64_t idx, int64_t, double* acc) const { acc[0] += double(m[idx]); }
};
template <class T>
struct ColumnOut {
  T* out;
  __device__ void operator()(int64_t j, const double* s) const { out[j] = T(s[0]); }
};

// Element (i, j) of a step's k rows: the CPU's forward_row at column j (every column of a row is independent).
template <class T>
__global__ void lstm_step_kernel(int64_t d, int gate, int cell, int cand, const T* peep, T* g, const T* cp, T* c, T* h, const int64_t* row_of, T* hs,
                                 T* cs, int64_t k) {
  OAR_GRID_STRIDE(e, k * d) {
    const int64_t i = e / d, j = e - i * d;
    T* gr = g + i * 4 * d;
    const T c_prev = cp ? cp[e] : T(0);
    T ai = gr[d + j], af = gr[2 * d + j];
    if (cp && peep) {
      ai += c_prev * peep[j];
      af += c_prev * peep[d + j];
    }
    const T gc = act(cand, gr[j]), gi = act(gate, ai), gf = act(gate, af);
    const T cv = cp ? gf * c_prev + gi * gc : gi * gc;
    T ao = gr[3 * d + j];
    if (peep) ao += cv * peep[2 * d + j];
    const T go = act(gate, ao);
    const T hv = act(cell, cv) * go;
    gr[j] = gc, gr[d + j] = gi, gr[2 * d + j] = gf, gr[3 * d + j] = go;
    c[e] = cv, h[e] = hv;
    const int64_t r = row_of[i];
    hs[r * d + j] = hv, cs[r * d + j] = cv;
  }
}

// The CPU's backward_row at column j, its operations in the same order.
template <class T>
__global__ void lstm_step_grad_kernel(int64_t d, int gate, int cell, int cand, const T* peep, const T* g, const T* c, const T* cp, const T* dh,
                                      const T* dc_in, T* dg, T* dcp, int64_t k) {
  OAR_GRID_STRIDE(e, k * d) {
    const int64_t i = e / d, j = e - i * d;
    const T* gr = g + i * 4 * d;
    const T gc = gr[j], gi = gr[d + j], gf = gr[2 * d + j], go = gr[3 * d + j];
    const T ac = act(cell, c[e]);
    T dgo = act_grad(gate, go, dh[e] * ac);
    T dgc = act_grad(cell, ac, dh[e] * go);
    dgc += peep ? dc_in[e] + dgo * peep[2 * d + j] : dc_in[e];  // dc, the total gradient of c_t
    T dgi = dgc * gc;
    T dgf = cp ? dgc * cp[e] : T(0);
    T dcpv = dcp ? dcp[e] : T(0);
    if (dcp) dcpv += dgc * gf;
    dgc = act_grad(cand, gc, dgc * gi);
    dgi = act_grad(gate, gi, dgi);
    dgf = act_grad(gate, gf, dgf);
    if (dcp && peep) dcpv += dgi * peep[j] + dgf * peep[d + j];
    if (dcp) dcp[e] = dcpv;
    T* dgr = dg + i * 4 * d;
    dgr[j] = dgc, dgr[d + j] = dgi, dgr[2 * d + j] = dgf, dgr[3 * d + j] = dgo;
  }
}

/// The three peephole sums of column j: dg_i c_prev, dg_f c_prev (rows from `from` on), dg_o c.
template <class T>
struct PeepTerms {
  const T *dg, *c, *c0;
  const int64_t* prev;
  int64_t k0, from, d;
  __device__ void operator()(int64_t idx, int64_t j, double* acc) const {
    const int64_t r = idx / d;
    const T* gr = dg + r * 4 * d;
    acc[2] += double(gr[3 * d + j] * c[idx]);
    if (r < from) return;
    const T cp = r >= k0 ? c[prev[r] * d + j] : c0[idx];
    acc[0] += double(gr[d + j] * cp);
    acc[1] += double(gr[2 * d + j] * cp);
  }
};
template <class T>
struct PeepOut {
  T* out;
  int64_t d;
  __device__ void operator()(int64_t j, const double* s) const {
    out[j] = T(s[0]), out[d + j] = T(s[1]), out[2 * d + j] = T(s[2]);
  }
};

template <class T>
__global__ void gru_gates_kernel(int gate, T* g, const T* hp, T* rh, int64_t k, int64_t d) {
  OAR_GRID_STRIDE(e, k * d) {
    const int64_t i = e / d, j = e - i * d;
    T* gr = g + i * 3 * d;
    const T u = act(gate, gr[j]), r = act(gate, gr[d + j]);
    gr[j] = u, gr[d + j] = r;
    rh[e] = hp ? r * hp[e] : T(0);
  }
}

template <class T>
__global__ void gru_output_kernel(int cand, T* g, const T* hp, T* h, const int64_t* row_of, T* hs, int64_t k, int64_t d) {
  OAR_GRID_STRIDE(e, k * d) {
    const int64_t i = e / d, j = e - i * d;
    T* gr = g + i * 3 * d;
    const T cv = act(cand, gr[2 * d + j]), u = gr[j];
    gr[2 * d + j] = cv;
    const T hv = hp ? hp[e] + u * (cv - hp[e]) : u * cv;
    h[e] = hv;
    if (hs) hs[row_of[i] * d + j] = hv;
  }
}

template <class T>
__global__ void gru_gates_grad_kernel(int gate, int cand, const T* g, const T* hp, const T* dh, T* dg, T* dhp, int64_t k, int64_t d) {
  OAR_GRID_STRIDE(e, k * d) {
    const int64_t i = e / d, j = e - i * d;
    const T* gr = g + i * 3 * d;
    const T u = gr[j], cv = gr[2 * d + j], dhv = dh[e];
    T* dgr = dg + i * 3 * d;
    dgr[2 * d + j] = act_grad(cand, cv, dhv * u);
    dgr[j] = act_grad(gate, u, hp ? dhv * (cv - hp[e]) : dhv * cv);
    if (dhp) dhp[e] += dhv * (T(1) - u);
    if (!hp) dgr[d + j] = T(0);  // r met only zeros
  }
}

template <class T>
__global__ void gru_reset_grad_kernel(int gate, const T* g, const T* hp, const T* drh, T* dg, T* dhp, int64_t k, int64_t d) {
  OAR_GRID_STRIDE(e, k * d) {
    const int64_t i = e / d, j = e - i * d;
    const T r = g[i * 3 * d + d + j];
    dg[i * 3 * d + d + j] = act_grad(gate, r, drh[e] * hp[e]);
    if (dhp) dhp[e] += drh[e] * r;
  }
}

// lstm_unit: X's columns [i | f | o | g], through the CPU kernel's formulas (kernels/rnn_math.hpp).
template <class T>
__global__ void lstm_unit_kernel(const T* x, const T* cp, T* c, T* h, int64_t n, int64_t d, T fb) {
  OAR_GRID_STRIDE(e, n * d) {
    const int64_t r = e / d, j = e - r * d;
    fn::rnn::lstm_unit_forward(x + r * 4 * d, d, j, fb, cp[e], c[e], h[e]);
  }
}

template <class T>
__global__ void lstm_unit_grad_kernel(const T* x, const T* cp, const T* c, const T* dc, const T* dh, T* dx, T* dcp, int64_t n, int64_t d, T fb) {
  OAR_GRID_STRIDE(e, n * d) {
    const int64_t r = e / d, j = e - r * d;
    const T dcv = fn::rnn::lstm_unit_backward(x + r * 4 * d, d, j, fb, cp[e], c[e], dc[e], dh[e], dx ? dx + r * 4 * d : nullptr);
    if (dcp) dcp[e] = dcv;
  }
}

}  // namespace

int rnn_gate_inputs(Elem t, const void* x, const int64_t* row_of, const void* bias, void* out, int64_t rows, int64_t width, Stream s) {
  if (rows * width == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    gate_inputs_kernel<<<blocks_for(rows * width), kThreads, 0, s>>>(static_cast<const T*>(x), row_of, static_cast<const T*>(bias), static_cast<T*>(out),
                                                                     rows, width);
    return launched();
  });
}

int rnn_column_sums(Elem t, const void* m, int64_t rows, int64_t width, void* out, void* scratch, Stream s) {
  if (width == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    channel_sum<1>(rows, width, 1, scratch, ColumnTerm<T>{static_cast<const T*>(m)}, ColumnOut<T>{static_cast<T*>(out)}, s);
    return launched();
  });
}

int lstm_step(Elem t, const LstmCell& p, void* g, const void* c_prev, void* c, void* h, const int64_t* row_of, void* hs, void* cs, int64_t k, Stream s) {
  if (k * p.d == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    lstm_step_kernel<<<blocks_for(k * p.d), kThreads, 0, s>>>(p.d, p.gate, p.cell, p.candidate, static_cast<const T*>(p.peep), static_cast<T*>(g),
                                                              static_cast<const T*>(c_prev), static_cast<T*>(c), static_cast<T*>(h), row_of,
                                                              static_cast<T*>(hs), static_cast<T*>(cs), k);
    return launched();
  });
}

int lstm_step_grad(Elem t, const LstmCell& p, const void* g, const void* c, const void* c_prev, const void* dh, const void* dc, void* dg, void* dc_prev,
                   int64_t k, Stream s) {
  if (k * p.d == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    lstm_step_grad_kernel<<<blocks_for(k * p.d), kThreads, 0, s>>>(p.d, p.gate, p.cell, p.candidate, static_cast<const T*>(p.peep),
                                                                   static_cast<const T*>(g), static_cast<const T*>(c), static_cast<const T*>(c_prev),
                                                                   static_cast<const T*>(dh), static_cast<const T*>(dc), static_cast<T*>(dg),
                                                                   static_cast<T*>(dc_prev), k);
    return launched();
  });
}

int lstm_peephole_grad(Elem t, const void* dg, const void* c, const void* c0, const int64_t* prev, int64_t k0, int64_t from, int64_t rows, int64_t d,
                       void* dpeep, void* scratch, Stream s) {
  if (d == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    const PeepTerms<T> terms{static_cast<const T*>(dg), static_cast<const T*>(c), static_cast<const T*>(c0), prev, k0, from, d};
    channel_sum<3>(rows, d, 1, scratch, terms, PeepOut<T>{static_cast<T*>(dpeep), d}, s);
    return launched();
  });
}

int gru_gates(Elem t, int gate, void* g, const void* hp, void* rh, int64_t k, int64_t d, Stream s) {
  if (k * d == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    gru_gates_kernel<<<blocks_for(k * d), kThreads, 0, s>>>(gate, static_cast<T*>(g), static_cast<const T*>(hp), static_cast<T*>(rh), k, d);
    return launched();
  });
}

int gru_output(Elem t, int candidate, void* g, const void* hp, void* h, const int64_t* row_of, void* hs, int64_t k, int64_t d, Stream s) {
  if (k * d == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    gru_output_kernel<<<blocks_for(k * d), kThreads, 0, s>>>(candidate, static_cast<T*>(g), static_cast<const T*>(hp), static_cast<T*>(h), row_of,
                                                             static_cast<T*>(hs), k, d);
    return launched();
  });
}

int gru_gates_grad(Elem t, int gate, int candidate, const void* g, const void* hp, const void* dh, void* dg, void* dhp, int64_t k, int64_t d, Stream s) {
  if (k * d == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    gru_gates_grad_kernel<<<blocks_for(k * d), kThreads, 0, s>>>(gate, candidate, static_cast<const T*>(g), static_cast<const T*>(hp),
                                                                 static_cast<const T*>(dh), static_cast<T*>(dg), static_cast<T*>(dhp), k, d);
    return launched();
  });
}

int gru_reset_grad(Elem t, int gate, const void* g, const void* hp, const void* drh, void* dg, void* dhp, int64_t k, int64_t d, Stream s) {
  if (k * d == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    gru_reset_grad_kernel<<<blocks_for(k * d), kThreads, 0, s>>>(gate, static_cast<const T*>(g), static_cast<const T*>(hp), static_cast<const T*>(drh),
                                                                 static_cast<T*>(dg), static_cast<T*>(dhp), k, d);
    return launched();
  });
}

int lstm_unit(Elem t, const void* x, const void* c_prev, void* c, void* h, int64_t n, int64_t d, float forget_bias, Stream s) {
  if (n * d == 0) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    lstm_unit_kernel<<<blocks_for(n * d), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(c_prev), static_cast<T*>(c), static_cast<T*>(h),
                                                            n, d, T(forget_bias));
    return launched();
  });
}

int lstm_unit_grad(Elem t, const void* x, const void* c_prev, const void* c, const void* dc, const void* dh, void* dx, void* dc_prev, int64_t n,
                   int64_t d, float forget_bias, Stream s) {
  if (n * d == 0 || (!dx && !dc_prev)) return 0;
  return by_float(t, [&](auto z) {
    using T = decltype(z);
    lstm_unit_grad_kernel<<<blocks_for(n * d), kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<const T*>(c_prev), static_cast<const T*>(c),
                                                                 static_cast<const T*>(dc), static_cast<const T*>(dh), static_cast<T*>(dx),
                                                                 static_cast<T*>(dc_prev), n, d, T(forget_bias));
    return launched();
  });
}

}  // namespace oar::cuda_kernels
