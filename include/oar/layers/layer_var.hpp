// oar/layers/layer_var.hpp: LayerVar<Self>, the base of the typed results of the common layers
// (oar::Conv2dLayer, ...): Var's fluent setters returning the layer's own type, so that its typed options
// (`.padding({1, 0})`) chain before and after `.act(...)`; and Size2, the two-int size those options take.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "oar/ir/attribute.hpp"
#include "oar/tape/tape.hpp"

namespace oar {

/// A 2-D extent (filter, window, stride, padding, dilation) as height and width: `3` is {3, 3}, `{3, 5}` is
/// height 3 and width 5.
struct Size2 {
  int64_t h = 0, w = 0;
  Size2(int64_t s) : h(s), w(s) {}
  Size2(int64_t height, int64_t width) : h(height), w(width) {}
  /// {h, w} as the conv and pool ops store their ksize / strides / paddings / dilations.
  std::vector<int32_t> ints() const { return {int32_t(h), int32_t(w)}; }
  friend bool operator==(const Size2&, const Size2&) = default;
};

/// A Var whose fluent setters return `Self`. A layer class derives from it, declares its option keys as
/// `Attr<T>` constants in a nested `keys` struct (the replay reads the same constants) and stores each typed
/// option with `option(keys::x, value)`, so a misspelt option does not compile.
template <class Self>
class LayerVar : public Var {
 public:
  LayerVar() = default;
  explicit LayerVar(const Var& v) : Var(v) {}

  /// Applies `a` to the layer's output.
  Self& act(const Activation& a) { Var::act(a); return self(); }
  /// Names the layer's output variable exactly `n` (and prefixes its parameters with it).
  Self& name(std::string n) { Var::name(std::move(n)); return self(); }
  /// Parameter options of the weights (one for all inputs; `params` gives one per input).
  Self& param(ParamAttr p) { Var::param(std::move(p)); return self(); }
  Self& params(std::vector<ParamAttr> p) { Var::params(std::move(p)); return self(); }
  /// `false` drops the bias; a ParamAttr configures it.
  Self& bias(ParamAttr p) { Var::bias(std::move(p)); return self(); }
  /// An option by name, e.g. an attribute of the op the layer emits; a layer that does not take it reports an
  /// error at replay. The typed setters are the checked way to the layer's own options.
  template <class V>
  Self& set(const std::string& key, V v) { Var::set(key, std::move(v)); return self(); }
  Self& stop_gradient(bool s = true) { Var::stop_gradient(s); return self(); }

 protected:
  /// Stores a typed option under its key constant.
  template <class T>
  Self& option(Attr<T> key, std::type_identity_t<T> v) { Var::set(std::string(key.name), std::move(v)); return self(); }

 private:
  Self& self() { return static_cast<Self&>(*this); }
};

}  // namespace oar
