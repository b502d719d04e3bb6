// kernels/rnn_math.hpp: the recurrent kernels' activations and lstm_unit's per-element formulas, host+device.
// The CPU kernels (kernels/cpu/rnn_batch.hpp and the lstm, gru and lstm_unit headers) call them in loops that
// the compiler vectorizes; the CUDA kernels (kernels/cuda/rnn.cu) call them one element a thread, so both
// places compute the same numbers. For floats, sigmoid and tanh go through a polynomial exp, written without
// branches so that the CPU loops over it vectorize (std::exp keeps them scalar); doubles use the library's exp
// and tanh.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "oar/config.hpp"

namespace oar::fn::rnn {

/// The activation codes: RnnAct's values (kernels/common/rnn_batch.hpp asserts that they agree).
enum : int { kIdentity = 0, kSigmoid = 1, kTanh = 2, kRelu = 3 };

/// x's bits as a To: std::bit_cast on the host, a byte copy in device code.
template <class To, class From>
OAR_HD To bits_as(From x) {
  static_assert(sizeof(To) == sizeof(From));
#ifdef __CUDA_ARCH__
  To t;
  memcpy(&t, &x, sizeof t);
  return t;
#else
  return std::bit_cast<To>(x);
#endif
}

/// exp(x) for floats: Cephes' expf (degree-6 polynomial on [-ln2/2, ln2/2] times 2^n); relative error ~1e-7,
/// inputs clamped to [-87, 88].
/// NOTE: n is rounded by adding 1.5 * 2^23 (the sum's low mantissa bits then hold n), not with std::floor:
/// GCC does not vectorize floor under the default -ftrapping-math.
OAR_HD inline float exp_approx(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const float n = shifted - 12582912.0f;
  const int32_t ni = bits_as<int32_t>(shifted) - bits_as<int32_t>(12582912.0f);
  const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * bits_as<float>((ni + 127) << 23);
}
OAR_HD inline double exp_approx(double x) { return std::exp(x); }

template <class T>
OAR_HD T sigmoid(T x) {
  return T(1) / (T(1) + exp_approx(-x));
}
/// tanh(x) = 2 sigmoid(2x) - 1 for floats (absolute error ~1e-7); the library's tanh for doubles.
OAR_HD inline float tanh(float x) { return 2.0f / (1.0f + exp_approx(-2.0f * x)) - 1.0f; }
OAR_HD inline double tanh(double x) { return std::tanh(x); }
OAR_HD inline float relu(float x) { return x > 0.0f ? x : 0.0f; }
OAR_HD inline double relu(double x) { return x > 0.0 ? x : 0.0; }

/// Activation `a` of x.
template <class T>
OAR_HD T act(int a, T x) {
  switch (a) {
    case kSigmoid: return sigmoid(x);
    case kTanh: return tanh(x);
    case kRelu: return relu(x);
    default: return x;
  }
}
/// d times the derivative of activation `a`, from its output y (sigmoid, tanh and relu need nothing else).
/// NOTE: relu's derivative at 0 is taken as 0, as Fluid does.
template <class T>
OAR_HD T act_grad(int a, T y, T d) {
  switch (a) {
    case kSigmoid: return d * (y * (T(1) - y));
    case kTanh: return d * (T(1) - y * y);
    case kRelu: return y > T(0) ? d : T(0);
    default: return d;
  }
}

/// lstm_unit's gates of column j, from X's row xr [i | f | o | g] of 4D values; fb is added to f's input.
template <class T>
struct LstmUnitGates {
  T i, f, o, g;
};
template <class T>
OAR_HD LstmUnitGates<T> lstm_unit_gates(const T* xr, int64_t d, int64_t j, T fb) {
  return {sigmoid(xr[j]), sigmoid(xr[d + j] + fb), sigmoid(xr[2 * d + j]), tanh(xr[3 * d + j])};
}
/// lstm_unit at column j: c = f c_prev + i g, h = o tanh(c).
template <class T>
OAR_HD void lstm_unit_forward(const T* xr, int64_t d, int64_t j, T fb, T c_prev, T& c, T& h) {
  const LstmUnitGates<T> s = lstm_unit_gates(xr, d, j, fb);
  c = s.f * c_prev + s.i * s.g;
  h = s.o * tanh(c);
}
/// lstm_unit's gradient at column j, given c and the gradients dc (from outside) and dh of its outputs:
/// X@GRAD's row dxr (skipped when null) and the returned C_prev@GRAD.
template <class T>
OAR_HD T lstm_unit_backward(const T* xr, int64_t d, int64_t j, T fb, T c_prev, T c, T dc, T dh, T* dxr) {
  const LstmUnitGates<T> s = lstm_unit_gates(xr, d, j, fb);
  const T tc = tanh(c);
  const T dcv = dc + dh * s.o * (T(1) - tc * tc);  // the cell's total gradient
  if (dxr) {
    dxr[j] = dcv * s.g * s.i * (T(1) - s.i);
    dxr[d + j] = dcv * c_prev * s.f * (T(1) - s.f);
    dxr[2 * d + j] = dh * tc * s.o * (T(1) - s.o);
    dxr[3 * d + j] = dcv * s.i * (T(1) - s.g * s.g);
  }
  return dcv * s.f;
}

}  // namespace oar::fn::rnn
