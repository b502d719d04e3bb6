// oar/ops/op.hpp: what an op declares (OpDef: slots, attributes with defaults and checks), the shape-inference
// context, the grad-maker context, and the concept every op struct satisfies.
#pragma once
#include <array>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "oar/ir/program.hpp"

namespace oar {

class InferShapeContext;
class GradContext;
class KernelContext;

/// One input or output slot of an op.
struct SlotDef {
  std::string name;
  bool duplicable = false;    ///< takes a list of variables
  bool dispensable = false;   ///< may be left out
  bool intermediate = false;  ///< an output only kernels and grads read
  /// An input its op wrote itself in an earlier run of the same prepared program (a decoder's key-value
  /// cache): never a feed, uninitialized before the first run, never a recycled buffer.
  bool state = false;
  std::string doc;
};

/// One attribute: name, type, default (absent = required), a check returning an error text or "".
struct AttrDef {
  std::string name;
  AttrType type;
  std::optional<Attribute> dflt;
  std::function<std::string(const Attribute&)> check;
  std::string doc;
};

enum SlotFlags : unsigned { none = 0, duplicable = 1, dispensable = 2, intermediate = 4, state = 8 };

using InferShapeFn = void (*)(InferShapeContext&);
using GradMakerFn = std::vector<Operator> (*)(const GradContext&);

/// How the executor runs an op that has no kernel: it moves values itself (feed, fetch) or runs the op's
/// sub-block (control flow). Every other op runs its kernel.
enum class RunBy : uint8_t { kernel, feed, fetch, conditional, conditional_grad, recurrent, recurrent_grad, while_loop, while_grad };

/// An op's schema, built fluently in each op's `def()`.
struct OpDef {
  std::string type;
  std::string doc;
  std::vector<SlotDef> inputs, outputs;
  std::vector<AttrDef> attrs;
  InferShapeFn infer_shape = nullptr;
  GradMakerFn grad = nullptr;  ///< filled from Op::grad when the op has one
  bool is_grad = false;        ///< a `<op>_grad` op derived from its forward op
  RunBy run_by = RunBy::kernel;  ///< or run by the executor itself (feed, fetch, control flow)
  /// Whether a CUDA graph may capture the op and replay it: not when the replay would differ from a run (a random
  /// op drawing a new seed from the executor each run) or when its kernel hands work to the host (a collective
  /// the communicator's thread carries). Null: always.
  bool (*replayable)(const Operator&) = nullptr;

  explicit OpDef(std::string t, std::string d = {}) : type(std::move(t)), doc(std::move(d)) {}
  explicit OpDef(std::string_view t, std::string d = {}) : type(t), doc(std::move(d)) {}
  explicit OpDef(const char* t, std::string d = {}) : type(t), doc(std::move(d)) {}
  OpDef& in(std::string name, unsigned flags = none, std::string d = {}) {
    inputs.push_back({std::move(name), bool(flags & duplicable), bool(flags & dispensable), bool(flags & intermediate), bool(flags & state), std::move(d)});
    return *this;
  }
  OpDef& out(std::string name, unsigned flags = none, std::string d = {}) {
    outputs.push_back({std::move(name), bool(flags & duplicable), bool(flags & dispensable), bool(flags & intermediate), bool(flags & state), std::move(d)});
    return *this;
  }
  /// An attribute with a default; the C++ type of `dflt` picks the AttrType (int -> INT, float -> FLOAT, ...).
  template <class V>
  OpDef& attr(std::string name, V dflt, std::string d = {}) {
    Attribute a = to_attribute(std::move(dflt));
    attrs.push_back({std::move(name), attr_type(a), std::move(a), nullptr, std::move(d)});
    return *this;
  }
  /// A typed attribute with its default: `.attr(Conv2d::groups, 1)`; the default must have the attribute's type.
  template <class T>
  OpDef& attr(Attr<T> a, std::type_identity_t<T> dflt, std::string d = {}) {
    attrs.push_back({std::string(a.name), attr_traits<T>::type, Attribute(std::move(dflt)), nullptr, std::move(d)});
    return *this;
  }
  /// A required typed attribute (no default).
  template <class T>
  OpDef& required_attr(Attr<T> a, std::string d = {}) {
    attrs.push_back({std::string(a.name), attr_traits<T>::type, std::nullopt, nullptr, std::move(d)});
    return *this;
  }
  /// A required attribute of type T (no default).
  template <class T>
  OpDef& required_attr(std::string name, std::string d = {}) {
    attrs.push_back({std::move(name), attr_traits<T>::type, std::nullopt, nullptr, std::move(d)});
    return *this;
  }
  /// A check on the last declared attribute: `pred(value)` must hold, else `what` is reported.
  template <class T, class Pred>
  OpDef& check(Pred pred, std::string what) {
    auto& a = attrs.back();
    std::string name = a.name;
    a.check = [pred, what, name](const Attribute& v) -> std::string {
      return pred(attr_as<T>(v, name)) ? std::string() : what;
    };
    return *this;
  }
  /// An op the executor runs itself (`how`: feed, fetch or a control-flow op).
  OpDef& no_kernel(RunBy how) {
    run_by = how;
    return *this;
  }
  /// The op may be captured in a CUDA graph only when `pred(op)` holds (`never_replayed` for no op of the type).
  OpDef& replayable_when(bool (*pred)(const Operator&)) {
    replayable = pred;
    return *this;
  }
  static bool never_replayed(const Operator&) { return false; }
  const SlotDef* find_input(std::string_view n) const {
    for (auto& s : inputs) if (s.name == n) return &s;
    return nullptr;
  }
  const SlotDef* find_output(std::string_view n) const {
    for (auto& s : outputs) if (s.name == n) return &s;
    return nullptr;
  }
  const AttrDef* find_attr(std::string_view n) const {
    for (auto& a : attrs) if (a.name == n) return &a;
    return nullptr;
  }
};

/// What shape inference sees: the op, its block, typed attribute access, and errors that name the op's origin.
class InferShapeContext {
 public:
  InferShapeContext(Operator& op, Block& block) : op_(op), block_(block) {}

  const Operator& op() const { return op_; }
  Block& block() const { return block_; }
  bool has_input(std::string_view slot) const { return op_.has_input(slot); }
  bool has_output(std::string_view slot) const { return op_.has_output(slot); }
  size_t num_inputs(std::string_view slot) const { return op_.input(slot).size(); }
  size_t num_outputs(std::string_view slot) const { return op_.output(slot).size(); }
  Variable& input_var(std::string_view slot, size_t i = 0) const { return var(op_.input(slot), slot, i); }
  Variable& output_var(std::string_view slot, size_t i = 0) const { return var(op_.output(slot), slot, i); }
  const Shape& shape(std::string_view slot, size_t i = 0) const { return input_var(slot, i).shape(); }
  DType dtype(std::string_view slot, size_t i = 0) const { return input_var(slot, i).dtype(); }
  int lod_level(std::string_view slot, size_t i = 0) const { return input_var(slot, i).lod_level(); }
  template <class T> T attr(const std::string& name) const { return op_.attr<T>(name); }
  template <class T> T attr(Attr<T> a) const { return op_.attr<T>(a.name); }

  /// Sets output `slot`[i]'s shape and dtype (and lod_level when given).
  void set_output(std::string_view slot, const Shape& s, DType t, int lod_level = -1, size_t i = 0) const {
    if (!op_.has_output(slot)) return;  // an optional output nobody asked for
    Variable& v = output_var(slot, i);
    v.set_shape(s).set_dtype(t);
    if (lod_level >= 0) v.set_lod_level(lod_level);
  }
  /// Copies the LoD level of input `in` to output `out` (Fluid's ShareLoD).
  void share_lod(std::string_view in, std::string_view out) const {
    if (op_.has_output(out) && op_.has_input(in)) output_var(out).set_lod_level(lod_level(in));
  }

  /// Throws an oar::Error that names the op and the shapes of all its inputs.
  template <class... Args>
  [[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) const {
    std::string msg = fmt::format("{}: {}", op_.type(), fmt::format(f, std::forward<Args>(args)...));
    std::string shapes;
    for (auto& s : op_.inputs())
      for (auto& n : s.args)
        if (auto* v = block_.find_var(n)) shapes += fmt::format("{}{}={}{}", shapes.empty() ? "" : ", ", s.slot, v->shape().str(), std::string(" ") + std::string(name(v->dtype())));
    if (!shapes.empty()) msg += fmt::format(" (inputs: {})", shapes);
    throw Error(msg, op_.origin());
  }
  template <class... Args>
  void check(bool cond, fmt::format_string<Args...> f, Args&&... args) const {
    if (!cond) [[unlikely]] fail(f, std::forward<Args>(args)...);
  }

 private:
  Variable& var(const std::vector<std::string>& names, std::string_view slot, size_t i) const {
    if (i >= names.size()) throw Error(fmt::format("{}: slot {} has no variable #{}", op_.type(), slot, i), op_.origin());
    Variable* v = block_.find_var(names[i]);
    if (!v) throw Error(fmt::format("{}: slot {} refers to unknown variable '{}'", op_.type(), slot, names[i]), op_.origin());
    return *v;
  }
  Operator& op_;
  Block& block_;
};

/// An op's attributes as its kernels read them: decoded once, when a program is prepared, from the op's
/// attribute map (or the schema's defaults) into the op's typed `Attrs` struct, which is kept with the
/// prepared step. Decoding is where a wrong attribute type or size is reported, naming the user's line.
class AttrReader {
 public:
  AttrReader(const Operator& op, const OpDef* def) : op_(op), def_(def) {}
  const Operator& op() const { return op_; }

  /// The value of `a`: the op's own, else the schema's default.
  template <class T>
  T operator()(Attr<T> a) const {
    if (op_.has_attr(a.name)) {
      try {
        return attr_as<T>(op_.attr(a.name), a.name);
      } catch (const Error& e) {
        throw Error(fmt::format("{}: {}", op_.type(), e.what()), op_.origin());
      }
    }
    if (def_)
      if (const AttrDef* d = def_->find_attr(a.name); d && d->dflt) return attr_as<T>(*d->dflt, a.name);
    throw Error(fmt::format("{}: attribute '{}' is missing and has no default", op_.type(), a.name), op_.origin());
  }
  /// A list attribute of exactly N entries, as a std::array (`strides`, `paddings`, ...).
  template <size_t N, class T>
  std::array<T, N> array(Attr<std::vector<T>> a) const {
    std::vector<T> v = (*this)(a);
    if (v.size() != N)
      throw Error(fmt::format("{}: attribute '{}' must have {} entries, got {}", op_.type(), a.name, N, v.size()), op_.origin());
    std::array<T, N> out;
    std::copy(v.begin(), v.end(), out.begin());
    return out;
  }

 private:
  const Operator& op_;
  const OpDef* def_;
};

/// The `Attrs` of an op without attributes its kernels read.
struct NoAttrs {
  explicit NoAttrs(const AttrReader&) {}
};

/// `x` -> `x@GRAD`.
inline std::string grad_var_name(const std::string& x) { return x + "@GRAD"; }
inline constexpr const char* kEmptyVarName = "@EMPTY@";

/// What a grad maker sees: the forward op, the names of its output gradients, and which input gradients
/// are wanted (the rest are in the no-grad set).
class GradContext {
 public:
  /// The no-grad set is held by reference: it must outlive the context (a temporary one is refused).
  GradContext(const Operator& fwd, const Block& block, const std::set<std::string>& no_grad) : fwd_(fwd), block_(block), no_grad_(no_grad) {}
  GradContext(const Operator& fwd, const Block& block, std::set<std::string>&&) = delete;
  /// Every input gradient wanted.
  GradContext(const Operator& fwd, const Block& block) : GradContext(fwd, block, none()) {}
  const Operator& fwd() const { return fwd_; }
  const Block& block() const { return block_; }
  const std::vector<std::string>& input(std::string_view slot) const { return fwd_.input(slot); }
  const std::vector<std::string>& output(std::string_view slot) const { return fwd_.output(slot); }
  /// Grad names of the forward outputs of `slot`.
  std::vector<std::string> output_grad(std::string_view slot) const { return grads(fwd_.output(slot), false); }
  /// Grad names of the forward inputs of `slot`; `@EMPTY@` where the gradient is not wanted.
  std::vector<std::string> input_grad(std::string_view slot) const { return grads(fwd_.input(slot), true); }
  bool wants(const std::string& var) const { return !no_grad_.count(var); }
  /// Whether an input of `slot` wants its gradient: a grad maker with no gradient to write makes no op.
  bool wants_grad(Slot slot) const {
    for (auto& n : fwd_.input(slot.name))
      if (wants(n)) return true;
    return false;
  }

  /// Fluid's default grad op: `<type>_grad` with every forward input and output (same slots), the output
  /// grads as `<slot>@GRAD` inputs, the input grads as `<slot>@GRAD` outputs, the forward attributes.
  Operator default_grad(bool with_outputs = true) const {
    Operator g = grad_op();
    for (auto& s : fwd_.inputs()) g.set_input(s.slot, s.args);
    if (with_outputs)
      for (auto& s : fwd_.outputs()) g.set_input(s.slot, s.args);
    for (auto& s : fwd_.outputs()) g.set_input(grad_var_name(s.slot), output_grad(s.slot));
    for (auto& s : fwd_.inputs()) g.set_output(grad_var_name(s.slot), input_grad(s.slot));
    return g;
  }
  enum CopyAttrs : bool { without_attrs = false, with_attrs = true };
  /// `<type>_grad` with the forward's origin (so its errors name the user's line) and, unless told not to, its
  /// attributes; the maker adds the slots it needs.
  Operator grad_op(CopyAttrs attrs = with_attrs) const { return new_op(fwd_.type() + "_grad", attrs); }
  /// A grad op's slots, named by the forward's: the forward inputs and outputs it reads (under their own slots),
  /// the outputs whose gradients it reads and the inputs whose gradients it writes (`<slot>@GRAD`).
  struct GradSlots {
    std::vector<Slot> inputs, outputs, output_grads, input_grads;
  };
  /// grad_op() with the slots of `s`, in that order.
  Operator grad_op(const GradSlots& s, CopyAttrs attrs = with_attrs) const {
    Operator op = grad_op(attrs);
    for (const Slot& x : s.inputs) op.set_input(std::string(x.name), input(x.name));
    for (const Slot& x : s.outputs) op.set_input(std::string(x.name), output(x.name));
    for (const Slot& x : s.output_grads) op.set_input(grad_var_name(std::string(x.name)), output_grad(x.name));
    for (const Slot& x : s.input_grads) op.set_output(grad_var_name(std::string(x.name)), input_grad(x.name));
    return op;
  }
  /// An op of another type standing for the forward: its origin, and its attributes when asked.
  Operator new_op(std::string_view type, CopyAttrs attrs = without_attrs) const {
    Operator op{std::string(type)};
    if (attrs)
      for (auto& [k, v] : fwd_.attrs()) op.set_attr(k, v);
    op.set_origin(fwd_.origin());
    return op;
  }

 private:
  std::vector<std::string> grads(const std::vector<std::string>& names, bool check) const {
    std::vector<std::string> out;
    for (auto& n : names) out.push_back(check && !wants(n) ? std::string(kEmptyVarName) : grad_var_name(n));
    return out;
  }
  static const std::set<std::string>& none() {
    static const std::set<std::string> empty;
    return empty;
  }
  const Operator& fwd_;
  const Block& block_;
  const std::set<std::string>& no_grad_;
};

/// A list of op structs; `void` entries are ignored (they end X-macro expansions).
template <class... Ops> struct op_list {};

template <class... L> struct op_list_concat;
template <class... A> struct op_list_concat<op_list<A...>> { using type = op_list<A...>; };
template <class... A, class... B, class... Rest>
struct op_list_concat<op_list<A...>, op_list<B...>, Rest...> : op_list_concat<op_list<A..., B...>, Rest...> {};

/// Calls `f.template operator()<Op>()` for every non-void op of the list.
template <class... Ops, class F>
void for_each_op(op_list<Ops...>, F&& f) {
  (([&] {
     if constexpr (!std::is_void_v<Ops>) f.template operator()<Ops>();
   }()),
   ...);
}

/// Every op struct has a schema and shape inference; `grad`, `eval_cpu`, `eval_grad_cpu` and `eval_cuda` are
/// optional members the registries pick up when present.
template <class Op>
concept OpSchema = requires(InferShapeContext& c) {
  { Op::def() } -> std::same_as<OpDef>;
  Op::infer_shape(c);
};

}  // namespace oar
