// oar/api/evaluator-inl.hpp: the implementation of evaluator.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/api/evaluator.hpp"

#include <algorithm>

#include "oar/api/fuse.hpp"
#include "oar/core/error.hpp"
#include "oar/ops/attention.hpp"
#include "oar/ops/position.hpp"
#include "oar/ops/registry.hpp"

namespace oar {

OAR_FUNC Evaluator::Evaluator(const Model& model, std::vector<std::string> fetch, EvaluatorOptions options)
    : model_(&model), fetch_(fetch.empty() ? model.outputs() : std::move(fetch)), exe_(model.place()) {
  Program test = model.program().clone(/*for_test=*/true);
  drop_persistable_outputs(test);
  prune_to_fetches(test);
  if (options.fuse) {
    FuseReport r = fuse_for_inference(test, std::set<std::string>(fetch_.begin(), fetch_.end()));
    fused_away_.insert(r.removed.begin(), r.removed.end());
  }
  if (options.kv_cache) use_caches(test);
  program_ = std::make_shared<const Program>(std::move(test));
  prepared_ = exe_.prepare(program_, model.scope(), 0, PrepareOptions{.read_only_persistables = true});
}

OAR_FUNC void Evaluator::prune_to_fetches(Program& p) {
  const Block& g = p.global_block();
  // A fetch the global block lacks is left to the executor, whose error names it when forward runs.
  for (const std::string& f : fetch_)
    if (!g.has_var(f)) return;
  const size_t before = g.num_ops();
  // Every variable no op writes (the data layers) stays declared, read or not: feeding one the fetches do not
  // need (a whole batch through forward(batch) or test(reader), say) is still no error.
  std::vector<std::string> keep = fetch_;
  for (const Variable* v : g.vars())
    if (!v->writer() && !v->persistable()) keep.push_back(v->name());
  Program pruned = p.prune(keep);
  if (pruned.global_block().num_ops() == before) return;
  for (const Variable* v : g.vars())
    if (!v->persistable() && !pruned.global_block().has_var(v->name())) pruned_away_.insert(v->name());  // persistables stay in the scope
  p = std::move(pruned);
}

OAR_FUNC void Evaluator::use_caches(Program& p) {
  using K = ops::KvCache;
  std::vector<std::string> counts;
  std::vector<const Operator*> positions;
  for (size_t b = 0; b < p.num_blocks(); ++b)
    for (Operator* op : p.block(int(b)).ops()) {
      if (op->type() == K::type) {
        op->set_attr(K::use_cache, true);
        (op->has_attr(K::count_only.name) && op->attr(K::count_only) ? counts : caches_).push_back(op->output(K::cache_out).at(0));
      } else if ((op->type() == ops::AddPositionEncoding::type || op->type() == ops::RotaryPositionEmbedding::type) && op->input(ops::AddPositionEncoding::offset).empty()) {
        positions.push_back(op);
      }
    }
  if (caches_.empty())
    throw Error("EvaluatorOptions::kv_cache: the model has no key-value cache (build its self-attention with the kv_cache option, "
                "or oar::kv_cache)");
  // Without an Offset a position op would number every run's new tokens from 0 again.
  if (!positions.empty())
    throw Error(fmt::format("EvaluatorOptions::kv_cache: this {} numbers the positions of each run's tokens from 0; give it the cached length "
                            "(oar::cached_length(tokens), or the length of a kv_cache) as its offset",
                            positions[0]->type()),
                positions[0]->origin());
  caches_.insert(caches_.end(), counts.begin(), counts.end());
}

OAR_FUNC void Evaluator::reset_cache() {
  for (const std::string& n : caches_)
    if (Value* v = prepared_->local_scope()->find(n); v && v->is_tensor()) v->tensor() = LoDTensor();
}

OAR_FUNC std::vector<int64_t> Evaluator::cached_lengths() const {
  if (caches_.empty()) throw Error("cached_lengths: this Evaluator keeps no key-value cache (EvaluatorOptions::kv_cache)");
  const Value* v = prepared_->local_scope()->find(caches_[0]);
  if (!v || !v->is_tensor() || !v->tensor().initialized()) return {};
  const LoDTensor& t = v->tensor();
  std::vector<int64_t> n;
  if (t.lod().empty()) {  // dense [B, ..., T, d]
    for (int64_t b = 0; b < t.dim(0); ++b) n.push_back(t.dim(t.rank() - 2));
  } else {
    for (size_t s = 0; s + 1 < t.lod()[0].size(); ++s) n.push_back(int64_t(t.lod()[0][s + 1] - t.lod()[0][s]));
  }
  return n;
}

OAR_FUNC Evaluator::Evaluator(const Model& model, std::span<const Var> fetch, EvaluatorOptions options)
    : Evaluator(model, model.names_of(fetch), options) {}

OAR_FUNC Evaluator::~Evaluator() {
  if (prepared_ && prepared_->local_scope()) model_->scope().drop(prepared_->local_scope());
}

OAR_FUNC std::vector<LoDTensor> Evaluator::forward(const FeedMap& feeds) { return exe_.run(*prepared_, model_->scope(), feeds, fetch_); }

OAR_FUNC PendingFetch Evaluator::forward_async(const FeedMap& feeds) { return exe_.run_async(*prepared_, model_->scope(), feeds, fetch_); }

OAR_FUNC std::vector<LoDTensor> Evaluator::forward(const io::Batch& batch, const std::vector<std::string>& feed_names) {
  return forward(to_feeds(batch, feed_names));
}

OAR_FUNC std::vector<LoDTensor> Evaluator::forward(const io::Batch& batch, std::span<const Var> feeds) {
  return forward(to_feeds(batch, feeds));
}

OAR_FUNC const LoDTensor& Evaluator::activation(const Var& v) const { return activation(model_->name_of(v)); }

OAR_FUNC std::map<std::string, double> Evaluator::test(io::Reader reader, MetricSet* metrics, const Var& prediction, std::span<const Var> feeds) {
  return test(std::move(reader), metrics, model_->name_of(prediction), model_->names_of(feeds));
}

OAR_FUNC FeedMap Evaluator::to_feeds(const io::Batch& batch, std::span<const Var> feeds) const {
  return to_feeds(batch, model_->names_of(feeds));
}

OAR_FUNC const LoDTensor& Evaluator::activation(const std::string& name) const {
  if (fused_away_.count(name))
    throw Error(fmt::format("no activation '{}': this Evaluator fused it away (EvaluatorOptions::fuse); fetch it, or build one without fuse", name));
  if (pruned_away_.count(name))
    throw Error(fmt::format("no activation '{}': this Evaluator runs only what its fetches ({}) need, and they do not need it; fetch it too",
                            name, fmt::join(fetch_, ", ")));
  Value* v = prepared_->local_scope()->find(name);
  if (!v || !v->is_tensor() || !v->tensor().initialized())
    throw Error(fmt::format("no activation '{}' (run forward first; is it a variable of the model's program?)", name));
  return v->tensor();
}

OAR_FUNC std::map<std::string, double> Evaluator::test(io::Reader reader, MetricSet* metrics, const std::string& prediction,
                                                       const std::vector<std::string>& feed_names) {
  std::map<std::string, double> sums;
  double n = 0;
  if (metrics) metrics->reset();
  for (auto& batch : reader) {
    auto outs = forward(batch, feed_names);
    double rows = batch.empty() || batch[0].rank() == 0 ? 1 : double(batch[0].dim(0));
    for (size_t i = 0; i < outs.size(); ++i)
      if (outs[i].numel() == 1) sums[fetch_[i]] += outs[i].get(0) * rows;
    n += rows;
    if (metrics) {
      const auto& names = feed_names.empty() ? model_->feeds() : feed_names;
      metrics->update(activation(prediction.empty() ? fetch_[0] : prediction), batch.at(names.size() > 1 ? 1 : 0));
    }
  }
  std::map<std::string, double> out;
  for (auto& [k, v] : sums) out[k] = n > 0 ? v / n : 0;
  if (metrics)
    for (auto& [k, v] : metrics->eval()) out[k] = v;
  return out;
}

OAR_FUNC void Evaluator::drop_persistable_outputs(Program& p) {
  for (size_t b = 0; b < p.num_blocks(); ++b) {
    Block& blk = p.block(int(b));
    for (Operator* op : blk.ops()) {
      const OpDef* d = OpRegistry::instance().find(op->type());
      if (!d) continue;
      auto& outs = op->mutable_outputs();
      std::erase_if(outs, [&](const SlotArgs& s) {
        const SlotDef* sd = d->find_output(s.slot);
        return sd && sd->dispensable && !s.args.empty() && std::all_of(s.args.begin(), s.args.end(), [&](const std::string& n) {
                 const Variable* v = blk.find_var(n);
                 return v && v->persistable();
               });
      });
    }
  }
}

OAR_FUNC FeedMap Evaluator::to_feeds(const io::Batch& batch, const std::vector<std::string>& feed_names) const {
  const auto& names = feed_names.empty() ? model_->feeds() : feed_names;
  if (batch.size() < names.size())
    throw Error(fmt::format("a batch of {} fields cannot feed {} variables ({})", batch.size(), names.size(), fmt::join(names, ", ")));
  FeedMap f;
  for (size_t i = 0; i < names.size(); ++i) f[names[i]] = batch[i];
  return f;
}

}  // namespace oar
