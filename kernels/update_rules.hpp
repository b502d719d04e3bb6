// kernels/update_rules.hpp: the optimizers' update of one element, written once as host+device functions that
// the CPU kernels (kernels/cpu/optimizers.hpp) and the CUDA kernels (kernels/cuda/optim.cu) both call. Each
// takes the parameter's and the rule's state by reference and leaves their new values there: the CPU kernels
// read one buffer and write another (an output may be a new tensor), the CUDA kernels update in place, and the
// arithmetic between is the same code.
#pragma once
#include <cmath>

#include "oar/config.hpp"

namespace oar::fn {

/// momentum: v = mu v + g; p -= lr (g + mu v) (nesterov) or lr v.
template <class T>
OAR_HD void momentum_step(T& p, T& v, T g, T lr, T mu, bool nesterov) {
  v = mu * v + g;
  p = nesterov ? p - (g + mu * v) * lr : p - lr * v;
}

/// adam, and adamw when `decay` (p -= wd p first, wd = lr coeff): m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
/// p -= lr_t m / (sqrt(v) + eps), with lr_t the bias-corrected rate lr sqrt(1 - b2^t) / (1 - b1^t).
template <class T>
OAR_HD void adam_step(T& p, T& m, T& v, T g, T lr_t, T wd, bool decay, T b1, T b2, T eps) {
  if (decay) p -= wd * p;
  m = b1 * m + (T(1) - b1) * g;
  v = b2 * v + (T(1) - b2) * g * g;
  p = p - lr_t * m / (std::sqrt(v) + eps);
}

/// adagrad (`plain`: m += g^2) and decayed_adagrad (m = d m + (1 - d) g^2): p -= lr g / (sqrt(m) + eps).
template <class T>
OAR_HD void adagrad_step(T& p, T& m, T g, T lr, T eps, T d, bool plain) {
  m = plain ? m + g * g : d * m + (T(1) - d) * g * g;
  p = p - lr * g / (std::sqrt(m) + eps);
}

/// adamax: m = b1 m + (1 - b1) g; u = max(b2 u + eps, |g|), compared as std::max compares (a NaN |g| leaves
/// b2 u + eps); p -= lr_t m / u, with lr_t = lr / (1 - b1^t).
template <class T>
OAR_HD void adamax_step(T& p, T& m, T& u, T g, T lr_t, T b1, T b2, T eps) {
  m = b1 * m + (T(1) - b1) * g;
  const T a = b2 * u + eps, ag = std::fabs(g);
  u = a < ag ? ag : a;
  p = p - lr_t * m / u;
}

/// rmsprop: ms = rho ms + (1 - rho) g^2; centered (mg not null): mg = rho mg + (1 - rho) g and the mean's square
/// taken from ms; mom = mu mom + lr g / sqrt(ms [- mg^2] + eps); p -= mom.
template <class T>
OAR_HD void rmsprop_step(T& p, T& ms, T* mg, T& mom, T g, T lr, T eps, T rho, T mu) {
  ms = rho * ms + (T(1) - rho) * g * g;
  T denom = ms + eps;
  if (mg) {
    *mg = rho * *mg + (T(1) - rho) * g;
    denom = ms - *mg * *mg + eps;
  }
  mom = mu * mom + lr * g / std::sqrt(denom);
  p = p - mom;
}

/// adadelta: eg = rho eg + (1 - rho) g^2; d = -sqrt((edx + eps) / (eg + eps)) g; edx = rho edx + (1 - rho) d^2;
/// p += d.
template <class T>
OAR_HD void adadelta_step(T& p, T& eg, T& edx, T g, T rho, T eps) {
  eg = rho * eg + (T(1) - rho) * g * g;
  const T d = -std::sqrt((edx + eps) / (eg + eps)) * g;
  edx = rho * edx + (T(1) - rho) * d * d;
  p = p + d;
}

/// lamb's moments (adam's) and its direction r = (m / c1) / (sqrt(v / c2) + eps) + wd p, with c1 = 1 - b1^t and
/// c2 = 1 - b2^t; the step along r (its trust ratio) needs every element's r first, so it is the caller's.
template <class T>
OAR_HD T lamb_direction(T p, T& m, T& v, T g, T b1, T b2, T c1, T c2, T eps, T wd) {
  m = b1 * m + (T(1) - b1) * g;
  v = b2 * v + (T(1) - b2) * g * g;
  return (m / c1) / (std::sqrt(v / c2) + eps) + wd * p;
}

}  // namespace oar::fn
