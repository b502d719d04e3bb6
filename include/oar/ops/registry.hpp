// oar/ops/registry.hpp: the op registry, built on first use from op_list.hpp (no static-initializer
// registration), and `add_op`, which validates an op against its schema, appends it and infers shapes.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "oar/config.hpp"
#include "oar/ops/op.hpp"

namespace oar {

namespace detail {

/// Shape inference shared by every derived `<op>_grad`: each output `X@GRAD`[i] gets the shape and dtype of
/// input slot `X`[i] of the same op (the forward variable), or else of the variable named without `@GRAD`.
void infer_grad_shape(InferShapeContext& c);

/// The schema of `<type>_grad`, read off the forward op's grad maker: it runs on a forward op whose every slot
/// holds one variable named after the slot, and the `<type>_grad` ops it emits give the grad op's slots and
/// attributes. A grad input is dispensable or duplicable when the forward slot it comes from is; every grad
/// output is dispensable (a gradient nobody wants is left out, or named @EMPTY@); attributes keep the
/// forward's defaults and checks. Empty when the maker emits no `<type>_grad` op (it composes other ops).
std::optional<OpDef> derive_grad_def(const OpDef& fwd);

}  // namespace detail

/// All op schemas by type. Grad ops `<op>_grad` are derived for every op that has a grad maker.
class OpRegistry {
 public:
  static const OpRegistry& instance();
  const OpDef* find(std::string_view type) const {
    auto it = defs_.find(std::string(type));
    return it == defs_.end() ? nullptr : &it->second;
  }
  /// The schema of `type`; an oar::Error listing similar op types when unknown.
  const OpDef& get(std::string_view type) const;
  /// Every schema, sorted by type.
  std::vector<const OpDef*> all(bool with_grads = false) const;

 private:
  OpRegistry();
  void add(OpDef d);
  std::map<std::string, OpDef> defs_;
};

/// The schema of `type` (OpRegistry::instance().get(type)).
const OpDef& op_def(std::string_view type);

/// Checks `op` against its schema: known type, required inputs present, one variable per non-duplicable
/// slot, no unknown slots or attributes, attribute types and checks; fills attribute defaults.
void validate_op(Operator& op);

/// Validates `op`, creates missing output variables in `block`, appends the op and runs its shape inference.
/// On error nothing is left behind and the oar::Error names the op's origin.
Operator& add_op(Block& block, Operator op);

/// validate_op on every op of every block: what a program read from a file gets before anything runs it, since
/// the file may be damaged or written by something else (an op's kernel trusts its schema).
void validate_program(Program& p);

/// Re-runs shape inference of every op of every block (after a program was loaded or edited).
void infer_program_shapes(Program& p);

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/ops/registry-inl.hpp"
#endif
