// oar/api/model-inl.hpp: the implementation of model.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/api/model.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "oar/core/error.hpp"
#include "oar/core/file.hpp"
#include "oar/io/durable-inl.hpp"
#include "oar/io/inference_model.hpp"
#include "oar/io/tensor_file.hpp"
#include "oar/ir/serialize.hpp"
#include "oar/ops/registry.hpp"
#include "oar/runtime/executor.hpp"

namespace oar {

OAR_FUNC Model::Model(Topology t, uint64_t seed) : Model(std::move(t), cpu(), seed) {}

OAR_FUNC Model::Model(Topology t, Place place, uint64_t seed) : topo_(std::move(t)), seed_(seed), place_(place) {
  if (topo_.param_slot)
    if (auto s = topo_.param_slot->lock()) scope_ = std::static_pointer_cast<Scope>(s);
  if (!scope_) {
    scope_ = std::make_shared<Scope>();
    if (topo_.param_slot) *topo_.param_slot = scope_;
  }
  initialize(topo_.startup);
}

OAR_FUNC std::vector<std::string> Model::parameter_names() const {
  std::vector<std::string> out;
  for (auto* p : topo_.main.parameters()) out.push_back(p->name());
  return out;
}

OAR_FUNC LoDTensor& Model::parameter(const std::string& name) const {
  Value* v = scope_->find(name);
  if (!v || !v->is_tensor() || !v->tensor().initialized()) throw Error(fmt::format("the model has no parameter '{}'", name));
  return v->tensor();
}

OAR_FUNC void Model::initialize(const Program& startup) {
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

OAR_FUNC void Model::save(const std::filesystem::path& dir) const {
  std::string meta = "feeds";
  for (auto& f : topo_.feeds) meta += " " + f;
  meta += "\noutputs";
  for (auto& o : topo_.outputs) meta += " " + o;
  meta += "\nparams";
  for (auto& [n, t] : persistables()) meta += " " + n;
  // The four files are staged and swapped in as one directory: a kill never mixes two saves (io/durable-inl.hpp).
  io::detail::save_directory(dir, [&](const std::filesystem::path& d) {
    save_program(topo_.main, d / "__model__");
    save_program(topo_.startup, d / "__startup__");
    io::save_combined(d / "__params__", persistables());
    detail::write_file_atomic(d / "__meta__", meta + "\n");
  });
}

OAR_FUNC Model Model::load(const std::filesystem::path& dir, Place place) {
  io::detail::recover_directory(dir);  // a crash in the middle of a save may have left the model aside
  Topology t;
  t.main = io::load_checked_program(dir / "__model__");
  t.startup = io::load_checked_program(dir / "__startup__");
  std::vector<std::string> params;
  // Three lines, as save() writes them: "feeds", "outputs" and "params", each followed by its names.
  const std::string meta_file = (dir / "__meta__").string();
  std::istringstream meta(detail::read_file(dir / "__meta__"));
  std::string line;
  std::set<std::string> keys;
  while (std::getline(meta, line)) {
    std::istringstream ls(line);
    std::string key, v;
    if (!(ls >> key)) continue;
    if ((key != "feeds" && key != "outputs" && key != "params") || !keys.insert(key).second)
      throw Error(fmt::format("'{}' is damaged: line '{}' is not one of feeds, outputs and params, each once", meta_file, line));
    while (ls >> v) (key == "feeds" ? t.feeds : key == "outputs" ? t.outputs : params).push_back(v);
  }
  if (keys.size() != 3) throw Error(fmt::format("'{}' is damaged: it must have the lines feeds, outputs and params", meta_file));
  for (const auto* names : {&t.feeds, &t.outputs})
    for (const std::string& n : *names)
      if (!t.main.global_block().find_var(n)) throw Error(fmt::format("'{}' names '{}', which is no variable of __model__", meta_file, n));
  infer_program_shapes(t.main);
  Model m(std::move(t), place);
  auto tensors = io::load_combined(dir / "__params__", params);
  for (size_t i = 0; i < params.size(); ++i) m.scope_->var(params[i]).tensor() = LoDTensor(tensors[i].to(place), tensors[i].lod());
  return m;
}

OAR_FUNC void Model::save_inference(const std::filesystem::path& dir, std::vector<std::string> feeds, std::vector<std::string> fetches,
                                    bool combined) const {
  io::save_inference_model(dir, feeds.empty() ? topo_.feeds : feeds, fetches.empty() ? topo_.outputs : fetches, topo_.main, *scope_, combined);
}

OAR_FUNC void Model::save_inference(const std::filesystem::path& dir, std::span<const Var> feeds, std::span<const Var> fetches, bool combined) const {
  save_inference(dir, names_of(feeds), names_of(fetches), combined);
}

OAR_FUNC std::vector<std::string> Model::names_of(std::span<const Var> vars) const {
  std::vector<std::string> out;
  out.reserve(vars.size());
  for (auto& v : vars) out.push_back(name_of(v));
  return out;
}

OAR_FUNC Model Model::load_inference(const std::filesystem::path& dir, Place place) {
  io::InferenceModel im = io::load_inference_model(dir);
  Topology t;
  t.main = std::move(im.program);  // validated by load_inference_model
  infer_program_shapes(t.main);
  t.feeds = im.feeds;
  t.outputs = im.fetches;
  Model m(std::move(t), place);
  for (auto& [n, v] : im.params) m.scope_->var(n).tensor() = LoDTensor(v.to(place), v.lod());
  return m;
}

OAR_FUNC std::vector<std::pair<std::string, LoDTensor>> Model::persistables() const {
  std::vector<std::pair<std::string, LoDTensor>> out;
  for (auto& n : scope_->local_names()) {
    Value* v = scope_->find_local(n);
    if (v && v->is_tensor() && v->tensor().initialized()) out.push_back({n, LoDTensor(v->tensor().to(cpu()), v->tensor().lod())});
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.first < b.first; });
  return out;
}

}  // namespace oar
