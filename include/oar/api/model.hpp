// oar/api/model.hpp: Model = {topology, parameters}. Parameters live in a Scope that every Model built from
// the same tape shares (by name, as Fluid's global scope); a Model saves to and loads from a directory.
#pragma once
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "oar/config.hpp"
#include "oar/core/place.hpp"
#include "oar/ir/program.hpp"
#include "oar/device/scope.hpp"
#include "oar/device/tensor.hpp"
#include "oar/tape/tape.hpp"

namespace oar {

/// A model's programs and parameters: `oar::Model model(tape.program({cost, acc}));` (then
/// `model.name_of(cost)`, `model.save(dir)`, `oar::Model::load(dir)`).
///
/// Model, Evaluator, GradientMachine and Optimizer take a tape Var wherever they take a variable's name, and a
/// list of Vars wherever they take a list of names: `{x, label}` (an initializer list, so that `{}` still
/// means the default and `{"x", "label"}` still means names) or a std::vector<Var> (as a std::span).
class Model {
 public:
  /// Takes a replayed topology and creates its parameters by running the startup program (only for
  /// parameters not already created by another Model of the same tape). `seed` fixes the initial values.
  explicit Model(Topology t, uint64_t seed = 42);
  /// The same on `place` (`oar::cuda(0)`): parameters live there, and every Evaluator, GradientMachine and
  /// Optimizer of the model runs there. An oar::Error when that device does not exist.
  Model(Topology t, Place place, uint64_t seed = 42);

  const Topology& topology() const { return topo_; }
  const Program& program() const { return topo_.main; }
  const Program& startup() const { return topo_.startup; }
  const std::vector<std::string>& feeds() const { return topo_.feeds; }
  const std::vector<std::string>& outputs() const { return topo_.outputs; }
  uint64_t seed() const { return seed_; }
  /// Where the parameters live and the model's programs run.
  Place place() const { return place_; }
  /// The scope holding parameters and other persistable state (optimizer accumulators, BN statistics).
  Scope& scope() const { return *scope_; }
  std::shared_ptr<Scope> shared_scope() const { return scope_; }
  /// The name a tape Var became in this model.
  const std::string& name_of(const Var& v) const { return topo_.name_of(v); }

  std::vector<std::string> parameter_names() const;
  /// A parameter's (or any persistable's) tensor; oar::Error naming it when absent.
  LoDTensor& parameter(const std::string& name) const;

  /// Runs the ops of `startup` whose outputs are not yet initialized in the scope (new parameters,
  /// new accumulators); existing values are kept.
  void initialize(const Program& startup);

  /// Writes `dir/__model__` (main program), `dir/__startup__`, `dir/__params__` (every persistable, Fluid's
  /// combined tensor format, sorted by name) and `dir/__meta__` (feeds, outputs). Each file is written
  /// atomically.
  void save(const std::filesystem::path& dir) const;
  /// Reads a directory written by save(); malformed or missing files give an oar::Error.
  static Model load(const std::filesystem::path& dir, Place place = cpu());

  /// Writes an inference model of this model's outputs `fetches` (default: all outputs) fed by `feeds`
  /// (default: the model's feeds): `dir/__model__` + parameters (io/inference_model.hpp).
  void save_inference(const std::filesystem::path& dir, std::vector<std::string> feeds = {}, std::vector<std::string> fetches = {},
                      bool combined = true) const;
  /// The same with tape Vars (an empty list: the default). The initializer-list form takes `{x}`, `{pred}`
  /// and keeps `save_inference(dir, {}, {}, false)` unambiguous.
  void save_inference(const std::filesystem::path& dir, std::span<const Var> feeds, std::span<const Var> fetches, bool combined = true) const;
  void save_inference(const std::filesystem::path& dir, std::initializer_list<Var> feeds, std::initializer_list<Var> fetches = {},
                      bool combined = true) const {
    save_inference(dir, std::span<const Var>(feeds), std::span<const Var>(fetches), combined);
  }
  /// The names the Vars became in this model (name_of of each).
  std::vector<std::string> names_of(std::span<const Var> vars) const;
  std::vector<std::string> names_of(std::initializer_list<Var> vars) const { return names_of(std::span<const Var>(vars)); }
  /// A model from an inference-model directory: its program, feeds, fetches (as outputs) and parameters.
  static Model load_inference(const std::filesystem::path& dir, Place place = cpu());

  /// Every persistable tensor of the scope, sorted by name, on the CPU (shared, not copied, when the model
  /// lives there).
  std::vector<std::pair<std::string, LoDTensor>> persistables() const;

 private:
  Topology topo_;
  uint64_t seed_;
  Place place_;
  std::shared_ptr<Scope> scope_;
  uint64_t init_runs_ = 0;
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/api/model-inl.hpp"
#endif
