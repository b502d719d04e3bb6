// oar/api/model.hpp: Model = {topology, parameters}. Parameters live in a Scope that every Model built from
// the same tape shares (by name, as Fluid's global scope); a Model saves to and loads from a directory.
#pragma once
#include <filesystem>

#include "oar/io/inference_model.hpp"
#include "oar/io/tensor_file.hpp"
#include "oar/ir/serialize.hpp"
#include "oar/runtime/executor.hpp"
#include "oar/tape/tape.hpp"

namespace oar {

class Model {
 public:
  /// Takes a replayed topology and creates its parameters by running the startup program (only for
  /// parameters not already created by another Model of the same tape). `seed` fixes the initial values.
  explicit Model(Topology t, uint64_t seed = 42) : Model(std::move(t), cpu(), seed) {}
  /// The same on `place` (`oar::cuda(0)`): parameters live there, and every Evaluator, GradientMachine and
  /// Optimizer of the model runs there. An oar::Error when that device does not exist.
  Model(Topology t, Place place, uint64_t seed = 42) : topo_(std::move(t)), seed_(seed), place_(place) {
    if (topo_.param_slot)
      if (auto s = topo_.param_slot->lock()) scope_ = std::static_pointer_cast<Scope>(s);
    if (!scope_) {
      scope_ = std::make_shared<Scope>();
      if (topo_.param_slot) *topo_.param_slot = scope_;
    }
    initialize(topo_.startup);
  }

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

  std::vector<std::string> parameter_names() const {
    std::vector<std::string> out;
    for (auto* p : topo_.main.parameters()) out.push_back(p->name());
    return out;
  }
  /// A parameter's (or any persistable's) tensor; oar::Error naming it when absent.
  LoDTensor& parameter(const std::string& name) const {
    Value* v = scope_->find(name);
    if (!v || !v->is_tensor() || !v->tensor().initialized()) throw Error(fmt::format("the model has no parameter '{}'", name));
    return v->tensor();
  }

  /// Runs the ops of `startup` whose outputs are not yet initialized in the scope (new parameters,
  /// new accumulators); existing values are kept.
  void initialize(const Program& startup) {
    Program p = startup;
    Block& g = p.global_block();
    for (size_t i = g.num_ops(); i-- > 0;) {
      bool all_set = true;
      for (auto& n : g.op(i).output_names()) {
        Value* v = scope_->find(n);
        all_set = all_set && v && v->is_tensor() && v->tensor().initialized();
      }
      if (all_set) g.remove_op(i);
    }
    if (g.num_ops() == 0) return;
    Executor exe(place_, seed_ + init_runs_++);
    exe.run(p, *scope_);
  }

  /// Writes `dir/__model__` (main program), `dir/__startup__`, `dir/__params__` (every persistable, Fluid's
  /// combined tensor format, sorted by name) and `dir/__meta__` (feeds, outputs). Each file is written
  /// atomically.
  void save(const std::filesystem::path& dir) const {
    std::filesystem::create_directories(dir);
    save_program(topo_.main, dir / "__model__");
    save_program(topo_.startup, dir / "__startup__");
    io::save_combined(dir / "__params__", persistables());
    std::string meta = "feeds";
    for (auto& f : topo_.feeds) meta += " " + f;
    meta += "\noutputs";
    for (auto& o : topo_.outputs) meta += " " + o;
    meta += "\nparams";
    for (auto& [n, t] : persistables()) meta += " " + n;
    detail::write_file_atomic(dir / "__meta__", meta + "\n");
  }
  /// Reads a directory written by save(); malformed or missing files give an oar::Error.
  static Model load(const std::filesystem::path& dir, Place place = cpu()) {
    Topology t;
    t.main = load_program(dir / "__model__");
    t.startup = load_program(dir / "__startup__");
    std::vector<std::string> params;
    std::istringstream meta(detail::read_file(dir / "__meta__"));
    std::string line;
    while (std::getline(meta, line)) {
      std::istringstream ls(line);
      std::string key, v;
      ls >> key;
      while (ls >> v) (key == "feeds" ? t.feeds : key == "outputs" ? t.outputs : params).push_back(v);
    }
    infer_program_shapes(t.main);
    Model m(std::move(t), place);
    auto tensors = io::load_combined(dir / "__params__", params);
    for (size_t i = 0; i < params.size(); ++i) m.scope_->var(params[i]).tensor() = LoDTensor(tensors[i].to(place), tensors[i].lod());
    return m;
  }

  /// Writes an inference model of this model's outputs `fetches` (default: all outputs) fed by `feeds`
  /// (default: the model's feeds): `dir/__model__` + parameters (io/inference_model.hpp).
  void save_inference(const std::filesystem::path& dir, std::vector<std::string> feeds = {}, std::vector<std::string> fetches = {},
                      bool combined = true) const {
    io::save_inference_model(dir, feeds.empty() ? topo_.feeds : feeds, fetches.empty() ? topo_.outputs : fetches, topo_.main, *scope_, combined);
  }
  /// A model from an inference-model directory: its program, feeds, fetches (as outputs) and parameters.
  static Model load_inference(const std::filesystem::path& dir, Place place = cpu()) {
    io::InferenceModel im = io::load_inference_model(dir);
    Topology t;
    t.main = std::move(im.program);
    infer_program_shapes(t.main);
    t.feeds = im.feeds;
    t.outputs = im.fetches;
    Model m(std::move(t), place);
    for (auto& [n, v] : im.params) m.scope_->var(n).tensor() = LoDTensor(v.to(place), v.lod());
    return m;
  }

  /// Every persistable tensor of the scope, sorted by name, on the CPU (shared, not copied, when the model
  /// lives there).
  std::vector<std::pair<std::string, LoDTensor>> persistables() const {
    std::vector<std::pair<std::string, LoDTensor>> out;
    for (auto& n : scope_->local_names()) {
      Value* v = scope_->find_local(n);
      if (v && v->is_tensor() && v->tensor().initialized()) out.push_back({n, LoDTensor(v->tensor().to(cpu()), v->tensor().lod())});
    }
    std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.first < b.first; });
    return out;
  }

 private:
  Topology topo_;
  uint64_t seed_;
  Place place_;
  std::shared_ptr<Scope> scope_;
  uint64_t init_runs_ = 0;
};

}  // namespace oar
