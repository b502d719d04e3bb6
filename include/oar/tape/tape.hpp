// oar/tape/tape.hpp: the Tape. Every layer call records a Creation (kind, inputs, options, the user's line)
// on the current tape of its thread and returns a Var handle; `tape.program(outputs)` replays the creations
// up to the last output into a fresh main + startup Program (a Topology); `var.shape()` replays what one Var
// depends on into a scratch Program.
#pragma once
#include <functional>
#include <memory>
#include <set>
#include <source_location>

#include "oar/config.hpp"
#include "oar/core/names.hpp"
#include "oar/ops/param_attr.hpp"

namespace oar {

class Tape;
class Var;
class LayerHelper;
struct ReplayContext;

/// An activation applied after a layer (`.act(oar::relu)`), or called as a layer on its own.
struct Activation {
  std::string type;
  std::map<std::string, Attribute> attrs;
  bool empty() const { return type.empty(); }
};

/// Options of a recorded layer, changed by the fluent setters of Var until the tape is replayed.
struct LayerOptions {
  std::string name;
  Activation act;
  std::vector<ParamAttr> params;  ///< per input (one given = used for every input)
  std::optional<ParamAttr> bias;
  std::map<std::string, Attribute> attrs;  ///< layer-specific options (the typed setters, e.g. `.stride(2)`, or `.set(key, v)`)
  std::optional<bool> stop_gradient;
};

using ReplayFn = std::function<std::vector<std::string>(LayerHelper&)>;

/// One recorded layer call.
struct Creation {
  std::string kind;
  Origin origin;
  std::vector<Var> inputs;
  LayerOptions opts;
  ReplayFn replay;
  int num_outputs = 1;
  std::vector<int> branches;    ///< open Branch scopes when recorded, outermost first
  int parent = -1;              ///< the creation whose body (sub-tape) this one belongs to
  std::pair<int, int> share{-1, -1};  ///< (shared-callable id, ordinal within its call) for oar::shared
};

namespace expr {
template <class N> struct Expr;
template <class T> struct is_expr : std::false_type {};
template <class N> struct is_expr<Expr<N>> : std::true_type {};
}  // namespace expr

namespace detail {
/// What a Var's output variable is (Var::shape / dtype / lod_level).
struct VarInfo {
  Shape shape;
  DType dtype = DType::f32;
  int lod_level = 0;
};

struct TapeState {
  std::vector<Creation> creations;
  std::vector<int> open_branches;
  int next_branch = 0;
  std::vector<int> body_stack;  ///< creations whose bodies are being recorded
  std::vector<std::pair<int, int>> share_stack;  ///< (shared id, creations recorded in this call so far)
  bool alive = true;
  /// Bumped by every change that can alter an existing creation's replay (options, a body's creations);
  /// `infos` (creation -> its outputs' VarInfo) holds only while `infos_version` equals it.
  uint64_t version = 0;
  uint64_t infos_version = 0;
  std::map<size_t, std::vector<VarInfo>> infos;
  /// Parameters of the Models built from this tape's programs (api/model.hpp): they share them by name.
  std::shared_ptr<std::weak_ptr<void>> param_slot = std::make_shared<std::weak_ptr<void>>();
};
inline thread_local std::vector<Tape*> tape_stack;
}  // namespace detail

/// A handle to output `output` of a recorded creation. Cheap to copy. The fluent setters change the
/// recorded layer until the tape is replayed.
class Var {
 public:
  Var() = default;
  /// An expression (`a * b + c`) becomes a Var by recording one fused_elementwise op (layers/expr.hpp).
  template <class E> requires expr::is_expr<E>::value
  Var(const E& e, std::source_location loc = std::source_location::current());

  bool valid() const { return state_ != nullptr; }
  size_t index() const { return index_; }
  int output() const { return output_; }
  const Creation& creation() const { return state().creations[index_]; }
  const std::string& kind() const { return creation().kind; }
  const Origin& origin() const { return creation().origin; }

  /// The output's shape (-1 where known only at run time), dtype and lod level as replay gives them, while
  /// building: the creations this Var depends on are replayed into a scratch program (cached until an
  /// option changes). A replay error (a shape mismatch upstream, an option the layer does not take) is
  /// the oar::Error that `tape.program(var)` would raise.
  Shape shape() const { return info().shape; }
  DType dtype() const { return info().dtype; }
  int lod_level() const { return info().lod_level; }

  /// Applies `a` to the layer's output (fc, conv2d, ...).
  Var& act(const Activation& a) { opts().act = a; return *this; }
  /// Names the layer's output variable exactly `n` (and prefixes its parameters with it).
  Var& name(std::string n) { opts().name = std::move(n); return *this; }
  /// Parameter options of the weights (one for all inputs, or one per input when called repeatedly via params()).
  Var& param(ParamAttr p) { opts().params = {std::move(p)}; return *this; }
  Var& params(std::vector<ParamAttr> p) { opts().params = std::move(p); return *this; }
  /// `false` drops the bias; a ParamAttr configures it.
  Var& bias(ParamAttr p) { opts().bias = std::move(p); return *this; }
  /// A layer-specific option by key (prefer the typed setters, e.g. `fc(x, 4).flatten_dims(2)`); a layer that does
  /// not take it reports an error.
  template <class V> Var& set(const std::string& key, V v) { opts().attrs[key] = to_attribute(std::move(v)); return *this; }
  Var& stop_gradient(bool s = true) { opts().stop_gradient = s; return *this; }

  friend bool operator==(const Var& a, const Var& b) { return a.state_ == b.state_ && a.index_ == b.index_ && a.output_ == b.output_; }
  friend bool operator<(const Var& a, const Var& b) { return std::tie(a.index_, a.output_) < std::tie(b.index_, b.output_); }

 protected:
  /// Appends `v` to the recorded layer's inputs: an input that a fluent option gives (attention's `.mask(m)`).
  /// `v` must come from the same tape and be recorded before this layer.
  void add_input(const Var& v, std::string_view option);

 private:
  friend class Tape;
  Var(std::shared_ptr<detail::TapeState> s, size_t i, int o) : state_(std::move(s)), index_(i), output_(o) {}
  /// The tape's state; oar::Error when this Var is empty or its tape is gone.
  detail::TapeState& state() const;
  LayerOptions& opts() {
    auto& s = state();
    ++s.version;
    return s.creations[index_].opts;
  }
  detail::VarInfo info() const;
  std::shared_ptr<detail::TapeState> state_;
  size_t index_ = 0;
  int output_ = 0;
};

/// What replaying a tape gives: the main program (forward ops), the startup program (parameter
/// initialization), the names of the chosen outputs, the data variables (feeds) and every creation's outputs.
struct Topology {
  Program main;
  Program startup;
  std::vector<std::string> outputs;
  std::vector<std::string> feeds;
  std::vector<std::vector<std::string>> creation_outputs;
  const void* tape = nullptr;
  /// Shared by every Topology of one tape: Models built from them share parameters.
  std::shared_ptr<std::weak_ptr<void>> param_slot;

  /// The variable name a Var became in this topology; oar::Error if the Var's creation was left out.
  const std::string& name_of(const Var& v) const;
};

/// Creations to leave out when replaying: `tape.program(g, oar::skip(d, e))`.
struct Skip {
  std::vector<Var> vars;
};
template <class... V> Skip skip(const V&... v) { return Skip{{v...}}; }

/// A scope of the tape: the creations inside a closed Branch are replayed only when a chosen output lies
/// inside it or depends on one of them; a creation outside that nobody chose and that reads a left-out
/// branch is left out with it.
class Branch {
 public:
  Branch();
  ~Branch();
  Branch(const Branch&) = delete;
  Branch& operator=(const Branch&) = delete;

 private:
  Tape* tape_;
};

/// The recording. Constructing a Tape makes it the current tape of this thread (tapes nest; the destructor
/// restores the outer one). Vars of a dead tape give a clear error when used.
class Tape {
 public:
  Tape();
  ~Tape();
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;

  /// The current tape of this thread; oar::Error naming the caller's line if there is none.
  static Tape& current(const Origin& where = {});

  size_t size() const { return state_->creations.size(); }
  const Creation& creation(size_t i) const { return state_->creations.at(i); }

  /// Records a creation and returns a Var for each of its outputs (the first when there is one).
  std::vector<Var> record(Creation c);

  /// Records the body of creation `owner` (its sub-tape): creations recorded while `body` runs belong to
  /// `owner` and are replayed by it into a sub-block.
  template <class F>
  auto record_body(const Var& owner, F&& body) {
    state_->body_stack.push_back(int(owner.index()));
    struct Pop {
      detail::TapeState* s;
      ~Pop() {
        s->body_stack.pop_back();
        ++s->version;  // the owner's replay now has its whole body
      }
    } pop{state_.get()};
    return body();
  }
  Creation& mutable_creation(const Var& v) {
    ++state_->version;
    return state_->creations.at(v.index());
  }

  /// Replays into a fresh Topology the creations up to the last of `outputs`: those the outputs need (through
  /// inputs and bodies) and those recorded outside any left-out Branch (evaluators), minus `skip`.
  Topology program(const std::vector<Var>& outputs, const Skip& skip = {}) const;
  Topology program(const Var& output, const Skip& skip = {}) const { return program(std::vector<Var>{output}, skip); }
  Topology program(std::initializer_list<Var> outputs, const Skip& skip = {}) const { return program(std::vector<Var>(outputs), skip); }

  // Used by Branch and oar::shared.
  int open_branch() {
    int id = state_->next_branch++;
    state_->open_branches.push_back(id);
    return id;
  }
  void close_branch() { state_->open_branches.pop_back(); }
  void push_share(int id) { state_->share_stack.push_back({id, 0}); }
  void pop_share() { state_->share_stack.pop_back(); }
  bool owns(const Var& v) const { return v.state_ == state_; }

 private:
  /// An oar::Error naming `c` when `in` is empty or belongs to a dead or another tape.
  void check_input(const Var& in, const Creation& c) const;
  friend struct ReplayContext;
  std::shared_ptr<detail::TapeState> state_;
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/tape/tape-inl.hpp"
#endif
