// oar/io/inference_model-inl.hpp: the implementation of inference_model.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/io/inference_model.hpp"

#include <algorithm>
#include <map>

#include "oar/core/error.hpp"
#include "oar/io/durable-inl.hpp"
#include "oar/io/tensor_file.hpp"
#include "oar/ir/serialize.hpp"
#include "oar/ops/feed_fetch.hpp"
#include "oar/ops/registry.hpp"

namespace oar::io {

OAR_FUNC void save_inference_model(const std::filesystem::path& dir, const std::vector<std::string>& feeds,
                                   const std::vector<std::string>& fetches, const Program& main, const Scope& scope, bool combined) {
  OAR_CHECK(!fetches.empty(), "save_inference_model: no fetch targets");
  for (auto& f : feeds) OAR_CHECK(main.global_block().find_var(f), "save_inference_model: no feed variable '{}' in the program", f);
  Program p = main.prune(fetches).clone(/*for_test=*/true);
  Block& g = p.global_block();
  for (auto& f : feeds)
    if (!g.has_var(f)) {  // a feed the targets do not need still gets its feed op (Fluid keeps the signature)
      const Variable& v = main.global_block().var(f);
      g.create_var(f, {.dtype = v.dtype(), .shape = v.shape(), .lod_level = v.lod_level()});
    }
  g.create_var("feed", {.persistable = true, .kind = VarKind::feed_minibatch});
  g.create_var("fetch", {.persistable = true, .kind = VarKind::fetch_list});
  for (size_t i = feeds.size(); i-- > 0;) {
    Operator op(std::string(ops::Feed::type));
    op.set_input(ops::Feed::x, {"feed"}).set_output(ops::Feed::out, {feeds[i]}).set_attr(ops::Feed::col, int32_t(i));
    g.prepend_op(std::move(op));
  }
  for (size_t i = 0; i < fetches.size(); ++i) {
    Operator op(std::string(ops::Fetch::type));
    op.set_input(ops::Fetch::x, {fetches[i]}).set_output(ops::Fetch::out, {"fetch"}).set_attr(ops::Fetch::col, int32_t(i));
    g.append_op(std::move(op));
  }
  std::vector<std::pair<std::string, LoDTensor>> params;
  for (auto* v : g.vars())
    if (v->persistable() && v->kind() == VarKind::lod_tensor) {
      Value* val = scope.find(v->name());
      if (!val || !val->is_tensor() || !val->tensor().initialized())
        throw Error(fmt::format("save_inference_model: the program needs '{}', but the scope holds no value for it", v->name()));
      params.push_back({v->name(), val->tensor()});
    }
  std::sort(params.begin(), params.end(), [](auto& a, auto& b) { return a.first < b.first; });
  const std::string program = serialize(p);
  // Written whole into a staging directory and swapped in: a kill never mixes two models (io/durable-inl.hpp).
  detail::save_directory(dir, [&](const std::filesystem::path& d) {
    if (combined) {
      save_combined(d / "__params__", params);
    } else {
      for (auto& [n, t] : params) save_tensor(d / n, t);
    }
    detail::save_with_sum(d / "__model__", program, {{"__model__", program.size()}});
  });
}

OAR_FUNC Program load_checked_program(const std::filesystem::path& path) {
  const std::string bytes = oar::detail::read_file(path);
  detail::verify_sum(path, bytes, "program");
  Program p;
  try {
    p = parse_program(bytes);
  } catch (Error& e) {
    e.add_context(fmt::format("while loading program file '{}'", path.string()));
    throw;
  }
  try {
    validate_program(p);
  } catch (Error& e) {
    e.add_context(fmt::format("while loading program file '{}'", path.string()));
    throw;
  }
  return p;
}

OAR_FUNC InferenceModel load_inference_model(const std::filesystem::path& dir) {
  detail::recover_directory(dir);  // a crash in the middle of a save may have left the model aside
  InferenceModel m;
  m.program = load_checked_program(dir / "__model__");
  Block& g = m.program.global_block();
  std::map<int, std::string> feeds, fetches;
  for (auto* op : g.ops()) {
    if (op->type() == ops::Feed::type) feeds[op->attr(ops::Feed::col)] = op->output(ops::Feed::out).at(0);
    if (op->type() == ops::Fetch::type) fetches[op->attr(ops::Fetch::col)] = op->input(ops::Fetch::x).at(0);
  }
  for (auto& [c, n] : feeds) m.feeds.push_back(n);
  for (auto& [c, n] : fetches) m.fetches.push_back(n);
  if (m.fetches.empty()) throw Error(fmt::format("inference model '{}' has no fetch ops", dir.string()));
  std::vector<std::string> names;
  for (auto* v : g.vars())
    if (v->persistable() && v->kind() == VarKind::lod_tensor) names.push_back(v->name());
  std::sort(names.begin(), names.end());
  if (std::filesystem::exists(dir / "__params__")) {
    auto ts = load_combined(dir / "__params__", names);
    for (size_t i = 0; i < names.size(); ++i) m.params.push_back({names[i], ts[i]});
  } else {
    for (auto& n : names) m.params.push_back({n, load_tensor(dir / n)});
  }
  return m;
}

}  // namespace oar::io
