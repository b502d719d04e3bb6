// oar/ops/param_attr-inl.hpp: the implementation of param_attr.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/ops/param_attr.hpp"

namespace oar {

OAR_FUNC std::string Regularizer::str() const { return fmt::format("{}({})", kind == Kind::l1 ? "l1" : "l2", coeff); }

OAR_FUNC std::string GradientClip::str() const {
  switch (kind) {
    case Kind::value: return fmt::format("value({}, {})", a, b);
    case Kind::norm: return fmt::format("norm({})", a);
    case Kind::global_norm: return fmt::format("global_norm({})", a);
  }
  return "";
}

}  // namespace oar
