// kernels/layer_norm_math.hpp: layer_norm's per-element formulas, host+device, called by the CPU kernel
// (kernels/cpu/layer_norm.hpp) and the CUDA kernel (kernels/cuda/layer_norm.cu) alike. Each place sums a row its
// own way (in double, in a fixed order of its own); what it does with the sums is this code.
#pragma once
#include <cmath>
#include <cstdint>

#include "oar/config.hpp"

namespace oar::fn::layer_norm {

/// A row's mean or biased variance from its sum over k elements (0 for an empty row).
OAR_HD inline double row_mean(double sum, int64_t k) { return k ? sum / double(k) : 0; }

/// 1 / sqrt(var + eps), in double, rounded to T.
template <class T>
OAR_HD T istd(double var, double eps) {
  return T(1.0 / std::sqrt(var + eps));
}

/// x normalized, in T: (x - mean) istd.
template <class T>
OAR_HD T xhat(T x, T mean, T istd) {
  return (x - mean) * istd;
}

/// X@GRAD of one element from g = dy scale and the row's means of g (mg) and of g xhat (mgx).
template <class T>
OAR_HD T dx(T g, T x, T mean, T istd, T mg, T mgx) {
  return istd * (g - mg - (x - mean) * istd * mgx);
}

}  // namespace oar::fn::layer_norm
