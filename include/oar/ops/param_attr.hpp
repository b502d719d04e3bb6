// oar/ops/param_attr.hpp: ParamAttr (name for sharing, initializer, learning-rate scale, regularizer,
// trainable, gradient clip), regularizers and clips as stored on parameters.
#pragma once
#include <optional>
#include <string>

#include "oar/config.hpp"
#include "oar/ops/initializers.hpp"

namespace oar {

/// Weight decay added to a parameter's gradient: L1 adds coeff * sign(p), L2 adds coeff * p.
struct Regularizer {
  enum class Kind { l1, l2 } kind = Kind::l2;
  double coeff = 0;
  /// "l1(0.001)", "l2(0.0005)".
  std::string str() const;
};
inline Regularizer L1Decay(double coeff) { return {Regularizer::Kind::l1, coeff}; }
inline Regularizer L2Decay(double coeff) { return {Regularizer::Kind::l2, coeff}; }

/// Gradient clipping of one parameter: by value to [min, max], by the gradient's norm, or by the global norm
/// of all gradients that use global-norm clipping.
struct GradientClip {
  enum class Kind { value, norm, global_norm } kind = Kind::norm;
  double a = 0, b = 0;
  /// "value(-1, 1)", "norm(5)", "global_norm(5)".
  std::string str() const;
};
inline GradientClip ClipByValue(double max, std::optional<double> min = {}) { return {GradientClip::Kind::value, min ? *min : -max, max}; }
inline GradientClip ClipByNorm(double clip_norm) { return {GradientClip::Kind::norm, clip_norm, 0}; }
inline GradientClip ClipByGlobalNorm(double clip_norm) { return {GradientClip::Kind::global_norm, clip_norm, 0}; }

/// Options of a parameter. `ParamAttr(false)` means "no parameter" (e.g. `.bias(false)`); a name shares the
/// parameter with every other layer that names it.
struct ParamAttr {
  std::string name;
  std::optional<Initializer> initializer;
  double learning_rate = 1.0;
  std::optional<Regularizer> regularizer;
  bool trainable = true;
  std::optional<GradientClip> gradient_clip;
  bool enabled = true;

  ParamAttr() = default;
  ParamAttr(bool on) : enabled(on) {}
  ParamAttr(const char* n) : name(n) {}
  ParamAttr(std::string n) : name(std::move(n)) {}
  ParamAttr(Initializer i) : initializer(i) {}
  ParamAttr(Regularizer r) : regularizer(r) {}

  ParamAttr& with_name(std::string n) { name = std::move(n); return *this; }
  ParamAttr& with_initializer(Initializer i) { initializer = i; return *this; }
  ParamAttr& with_learning_rate(double lr) { learning_rate = lr; return *this; }
  ParamAttr& with_regularizer(Regularizer r) { regularizer = r; return *this; }
  ParamAttr& with_trainable(bool t) { trainable = t; return *this; }
  ParamAttr& with_gradient_clip(GradientClip c) { gradient_clip = c; return *this; }
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/ops/param_attr-inl.hpp"
#endif
