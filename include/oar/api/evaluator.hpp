// oar/api/evaluator.hpp: Evaluator = {const Model&, own activations}. Many evaluators may run on one model at
// once, one per thread, with no locks and no copy of the weights: each has its own executor and scope of
// temporaries; parameters are only read (the program is the model's, cloned for test: is_test = true, and
// pruned to the ops its fetches need).
#pragma once
#include <initializer_list>
#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "oar/config.hpp"
#include "oar/api/metrics.hpp"
#include "oar/api/model.hpp"
#include "oar/io/dataset.hpp"
#include "oar/runtime/executor.hpp"

namespace oar {

struct EvaluatorOptions {
  /// Runs the program through fuse_for_inference (api/fuse.hpp), keeping the fetched variables: faster, the
  /// same values, but the fused-away intermediates are no activation() any more.
  bool fuse = false;
  /// Incremental decoding (docs/attention.md): every kv_cache in the program keeps its rows between forward
  /// calls, so each call feeds only the new tokens of each sequence (sequence s continuing the cache's sequence
  /// s) and costs O(cached + new), not a rerun of the whole prefix. reset_cache() starts over.
  bool kv_cache = false;
};

/// Runs a model forward: `oar::Evaluator ev(model); auto out = ev.forward({{"x", batch}}); ev.activation(hidden);`
class Evaluator {
 public:
  /// Evaluates `model`'s outputs (or `fetch`), running only the ops they depend on: `Evaluator(model, {pred})`
  /// of a model built from `program({cost, acc})` needs the feeds `pred` reads (x), not `label`.
  explicit Evaluator(const Model& model, std::vector<std::string> fetch = {}, EvaluatorOptions options = {});
  /// The same with tape Vars of the model's program (an empty list: the model's outputs).
  Evaluator(const Model& model, std::span<const Var> fetch, EvaluatorOptions options = {});
  Evaluator(const Model& model, std::initializer_list<Var> fetch, EvaluatorOptions options = {})
      : Evaluator(model, std::span<const Var>(fetch), options) {}
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;
  ~Evaluator();

  const Model& model() const { return *model_; }
  const std::vector<std::string>& fetch_names() const { return fetch_; }
  /// The program this evaluator runs (the model's, cloned for test, pruned to the fetches, fused when asked).
  const Program& program() const { return *program_; }

  /// Runs the model on `feeds`; returns the fetched outputs. The feeds needed are the data layers the fetches
  /// depend on; another of the model's feeds may be given too and is not read. A missing one is an oar::Error
  /// naming it and its data layer's line.
  std::vector<LoDTensor> forward(const FeedMap& feeds);
  /// The forward pass queued without waiting for it on a GPU (Executor::run_async): the outputs as a
  /// PendingFetch, so that the host prepares the next batch while the device runs this one. On the CPU the
  /// pass has run when it returns.
  PendingFetch forward_async(const FeedMap& feeds);
  /// Feeds batch field i to the model's feed i (or to `feed_names`, in order): the batch needs a field for each
  /// of those names, even one the fetches do not read (a label), since fields are matched by position.
  std::vector<LoDTensor> forward(const io::Batch& batch, const std::vector<std::string>& feed_names = {});
  std::vector<LoDTensor> forward(const io::Batch& batch, std::span<const Var> feeds);
  std::vector<LoDTensor> forward(const io::Batch& batch, std::initializer_list<Var> feeds) { return forward(batch, std::span<const Var>(feeds)); }
  /// Any variable of the last forward pass (an activation), e.g. activation("prediction"): one the fetches
  /// depend on (a variable they do not need is not computed, and asking for it is an oar::Error saying so).
  const LoDTensor& activation(const std::string& name) const;
  const LoDTensor& activation(const Var& v) const;

  /// Runs over every batch of one pass of `reader`: the average of each fetched scalar output (weighted by
  /// batch size), plus the values of `metrics` fed with (output `prediction`, feed `label`).
  std::map<std::string, double> test(io::Reader reader, MetricSet* metrics = nullptr, const std::string& prediction = {},
                                     const std::vector<std::string>& feed_names = {});
  /// The same with tape Vars (`feeds` empty: the model's feeds).
  std::map<std::string, double> test(io::Reader reader, MetricSet* metrics, const Var& prediction, std::span<const Var> feeds = {});
  std::map<std::string, double> test(io::Reader reader, MetricSet* metrics, const Var& prediction, std::initializer_list<Var> feeds) {
    return test(std::move(reader), metrics, prediction, std::span<const Var>(feeds));
  }

  /// Empties every key-value cache (EvaluatorOptions::kv_cache): the next forward starts new sequences.
  void reset_cache();
  /// The rows each sequence holds in the first key-value cache (empty before the first forward or after reset_cache).
  std::vector<int64_t> cached_lengths() const;

  /// A test program shares the model's persistable variables with every other evaluator, so its ops may not
  /// write them: optional outputs that name persistables (batch_norm's running statistics) are dropped; any
  /// other write is refused when the program is prepared.
  static void drop_persistable_outputs(Program& p);

  FeedMap to_feeds(const io::Batch& batch, const std::vector<std::string>& feed_names = {}) const;
  FeedMap to_feeds(const io::Batch& batch, std::span<const Var> feeds) const;
  FeedMap to_feeds(const io::Batch& batch, std::initializer_list<Var> feeds) const { return to_feeds(batch, std::span<const Var>(feeds)); }

 private:
  const Model* model_;
  std::vector<std::string> fetch_;
  std::set<std::string> fused_away_;
  std::set<std::string> pruned_away_;  ///< variables no fetch depends on: not in the program that runs
  /// Keeps only the ops of `p` that the fetches need, and every data layer (fed or not).
  void prune_to_fetches(Program& p);
  std::shared_ptr<const Program> program_;
  Executor exe_;
  std::shared_ptr<PreparedBlock> prepared_;
  void use_caches(Program& p);
  std::vector<std::string> caches_;  ///< the kv_cache ops' cache variables, rows first, counts after
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/api/evaluator-inl.hpp"
#endif
