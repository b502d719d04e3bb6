// oar/tape/replay.hpp: replaying a tape (ReplayContext, Tape::program) and LayerHelper, the one helper
// every layer function uses at replay: unique names, parameters (ParamAttr > layer default > Xavier / zero),
// temporaries, ops with the user's line, bias with `axis`, activation, multiple inputs.
#pragma once
#include <atomic>
#include <map>
#include <tuple>

#include "oar/config.hpp"
#include "oar/ops/registry.hpp"
#include "oar/tape/tape.hpp"

namespace oar {

/// The state of one replay: the programs being built, unique names, and what each creation became.
struct ReplayContext {
  const detail::TapeState& tape;
  Topology topo;
  NameGenerator names;
  std::vector<bool> included;
  std::map<std::tuple<int, int, int>, std::string> shared_params;  // (shared id, ordinal, param #) -> name
  std::map<std::string, std::string> shared_owner;                 // param name -> recorded line of its first user

  explicit ReplayContext(const detail::TapeState& t) : tape(t) { topo.creation_outputs.resize(t.creations.size()); }
  /// Marks the creations to replay for `outputs`: those they need (through inputs, bodies and owners), then,
  /// unless `only_needed`, every other top-level creation up to the last output (evaluators) that lies in no
  /// left-out Branch and reads no left-out creation; `skipped` ones never.
  void select(const std::vector<Var>& outputs, const std::set<size_t>& skipped, bool only_needed);
  void replay(size_t i);
  /// Replays the creations recorded in `parent`'s body into the main program's current block.
  std::vector<std::string> replay_children(size_t parent);
};

class LayerHelper {
 public:
  LayerHelper(ReplayContext& ctx, const Creation& c, size_t index) : ctx_(ctx), c_(c), index_(index) {}

  const Creation& creation() const { return c_; }
  size_t index() const { return index_; }
  const std::string& kind() const { return c_.kind; }
  Origin origin() const { return c_.origin; }
  ReplayContext& context() const { return ctx_; }
  Program& main() const { return ctx_.topo.main; }
  Program& startup() const { return ctx_.topo.startup; }
  Block& block() const { return main().current_block(); }

  /// The layer's unique name: `.name(...)` or `<kind>_<n>`.
  const std::string& name() {
    if (name_.empty()) name_ = c_.opts.name.empty() ? ctx_.names(c_.kind) : c_.opts.name;
    return name_;
  }

  // ---- inputs
  size_t num_inputs() const { return c_.inputs.size(); }
  const std::string& input(size_t i = 0) const;
  Variable& input_var(size_t i = 0) const { return block().var_recursive(input(i)); }
  /// The dtype shared by all inputs (an error naming them when they differ).
  DType input_dtype(size_t from = 0, size_t to = size_t(-1)) const;

  // ---- options
  bool has_option(const std::string& key) const { return c_.opts.attrs.count(key) != 0; }
  /// A layer option set with `.set(key, v)`, or `dflt`. Options nobody reads are reported after replay.
  template <class T>
  T option(const std::string& key, T dflt) {
    consumed_.insert(key);
    auto it = c_.opts.attrs.find(key);
    if (it == c_.opts.attrs.end()) return dflt;
    try {
      return attr_as<T>(it->second, key);
    } catch (const Error& e) {
      throw Error(fmt::format("{}: option '{}': {}", c_.kind, key, e.message()), c_.origin);
    }
  }
  /// Copies every option that names an attribute of `op`'s schema onto it (overriding the layer's value).
  void apply_options(Operator& op);
  const std::set<std::string>& consumed() const { return consumed_; }

  const ParamAttr& param_attr(size_t i = 0) const;
  ParamAttr bias_attr() const { return c_.opts.bias ? *c_.opts.bias : ParamAttr(); }

  // ---- variables
  /// A parameter: a name from `attr` shares it; inside oar::shared the same call position reuses it; otherwise
  /// a new `<name>.w_<n>` / `<name>.b_<n>`. Its init op goes to the startup program.
  Variable& create_parameter(const ParamAttr& attr, Shape shape, DType dtype, bool is_bias, std::optional<Initializer> dflt = {});
  /// A temporary `<name>.tmp_<n>` in the current block.
  Variable& create_tmp(DType dtype, bool stop_gradient = false);
  /// A global persistable variable (not a parameter) initialized in the startup program.
  Variable& create_global(const std::string& var_name, Shape shape, DType dtype, Initializer init);

  // ---- ops
  /// Appends `op` to the current block (validated, shapes inferred), stamped with the user's line.
  Operator& append_op(Operator op) {
    op.set_origin(c_.origin);
    return add_op(block(), std::move(op));
  }
  /// x + bias, the bias of shape x.shape[dim_start:dim_end] added with elementwise_add's `axis` = dim_start.
  std::string append_bias(const std::string& x, int dim_start, int dim_end = -1);
  /// The layer's `.act(...)` applied to x (x unchanged when none).
  std::string append_activation(const std::string& x);
  /// Replays this creation's body (sub-tape) into a new sub-block of the current block; returns its index.
  int replay_body();
  /// The name a Var got in this replay.
  const std::string& name_of(const Var& v) const { return ctx_.topo.name_of(v); }

 private:
  ReplayContext& ctx_;
  const Creation& c_;
  size_t index_;
  std::string name_;
  int params_made_ = 0;
  std::set<std::string> consumed_;
};

/// Records a layer; `replay` runs when the tape is replayed. The building block of every layer function.
std::vector<Var> record_layer(std::string kind, std::vector<Var> inputs, ReplayFn replay, std::source_location loc, int num_outputs = 1);

/// Wraps a callable so that every call reuses the parameters of the first: the i-th parameter-creating
/// layer of each call shares the i-th one's parameters (two texts, one projection).
template <class F>
class Shared {
 public:
  explicit Shared(F f) : f_(std::move(f)), id_(next_id()) {}
  template <class... Args>
  decltype(auto) operator()(Args&&... args) const {
    Tape& t = Tape::current();
    t.push_share(id_);
    struct Pop {
      Tape& t;
      ~Pop() { t.pop_share(); }
    } pop{t};
    return f_(std::forward<Args>(args)...);
  }

 private:
  static int next_id() {
    static std::atomic<int> n{0};
    return n++;
  }
  F f_;
  int id_;
};
template <class F> Shared<F> shared(F f) { return Shared<F>(std::move(f)); }

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/tape/replay-inl.hpp"
#endif
