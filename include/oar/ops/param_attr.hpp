// oar/ops/param_attr.hpp: ParamAttr (name for sharing, initializer, learning-rate scale, regularizer,
// trainable, gradient clip), regularizers and clips as stored on parameters.
#pragma once
#include <optional>

#include "oar/ops/initializers.hpp"

namespace oar {

/// Weight decay added to a parameter's gradient: L1 adds coeff * sign(p), L2 adds coeff * p.
struct Regularizer {
  enum class Kind { l1, l2 } kind = Kind::l2;
  double coeff = 0;
  std::string str() const { return fmt::format("{}({})", kind == Kind::l1 ? "l1" : "l2", coeff); }
};
inline Regularizer L1Decay(double coeff) { return {Regularizer::Kind::l1, coeff}; }
inline Regularizer L2Decay(double coeff) { return {Regularizer::Kind::l2, coeff}; }

/// Gradient clipping of one parameter: by value to [min, max], by the gradient's norm, or by the global norm
/// of all gradients that use global-norm clipping.
struct GradientClip {
  enum class Kind { value, norm, global_norm } kind = Kind::norm;
  double a = 0, b = 0;
  std::string str() const {
    switch (kind) {
      case Kind::value: return fmt::format("value({}, {})", a, b);
      case Kind::norm: return fmt::format("norm({})", a);
      case Kind::global_norm: return fmt::format("global_norm({})", a);
    }
    return "";
  }
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
