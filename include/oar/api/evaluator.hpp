// oar/api/evaluator.hpp: Evaluator = {const Model&, own activations}. Many evaluators may run on one model at
// once, one per thread, with no locks and no copy of the weights: each has its own executor and scope of
// temporaries; parameters are only read (the program is the model's, cloned for test: is_test = true).
#pragma once
#include "oar/api/fuse.hpp"
#include "oar/api/metrics.hpp"
#include "oar/api/model.hpp"
#include "oar/io/dataset.hpp"

namespace oar {

struct EvaluatorOptions {
  /// Runs the program through fuse_for_inference (api/fuse.hpp), keeping the fetched variables: faster, the
  /// same values, but the fused-away intermediates are no activation() any more.
  bool fuse = false;
};

class Evaluator {
 public:
  /// Evaluates `model`'s outputs (or `fetch`).
  explicit Evaluator(const Model& model, std::vector<std::string> fetch = {}, EvaluatorOptions options = {})
      : model_(&model), fetch_(fetch.empty() ? model.outputs() : std::move(fetch)), exe_(model.place()) {
    Program test = model.program().clone(/*for_test=*/true);
    drop_persistable_outputs(test);
    if (options.fuse) {
      FuseReport r = fuse_for_inference(test, std::set<std::string>(fetch_.begin(), fetch_.end()));
      fused_away_.insert(r.removed.begin(), r.removed.end());
    }
    program_ = std::make_shared<const Program>(std::move(test));
    prepared_ = exe_.prepare(program_, model.scope(), 0, PrepareOptions{.read_only_persistables = true});
  }
  Evaluator(const Evaluator&) = delete;
  Evaluator& operator=(const Evaluator&) = delete;
  ~Evaluator() {
    if (prepared_ && prepared_->local_scope()) model_->scope().drop(prepared_->local_scope());
  }

  const Model& model() const { return *model_; }
  const std::vector<std::string>& fetch_names() const { return fetch_; }
  /// The program this evaluator runs (the model's, cloned for test, fused when asked).
  const Program& program() const { return *program_; }

  /// Runs the model on `feeds`; returns the fetched outputs.
  std::vector<LoDTensor> forward(const FeedMap& feeds) { return exe_.run(*prepared_, model_->scope(), feeds, fetch_); }
  /// Feeds batch field i to the model's feed i (or to `feed_names`).
  std::vector<LoDTensor> forward(const io::Batch& batch, const std::vector<std::string>& feed_names = {}) {
    return forward(to_feeds(batch, feed_names));
  }
  /// Any variable of the last forward pass (an activation), e.g. activation("prediction").
  const LoDTensor& activation(const std::string& name) const {
    if (fused_away_.count(name))
      throw Error(fmt::format("no activation '{}': this Evaluator fused it away (EvaluatorOptions::fuse); fetch it, or build one without fuse", name));
    Value* v = prepared_->local_scope()->find(name);
    if (!v || !v->is_tensor() || !v->tensor().initialized())
      throw Error(fmt::format("no activation '{}' (run forward first; is it a variable of the model's program?)", name));
    return v->tensor();
  }

  /// Runs over every batch of one pass of `reader`: the average of each fetched scalar output (weighted by
  /// batch size), plus the values of `metrics` fed with (output `prediction`, feed `label`).
  std::map<std::string, double> test(io::Reader reader, MetricSet* metrics = nullptr, const std::string& prediction = {},
                                     const std::vector<std::string>& feed_names = {}) {
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

  /// A test program shares the model's persistable variables with every other evaluator, so its ops may not
  /// write them: optional outputs that name persistables (batch_norm's running statistics) are dropped; any
  /// other write is refused when the program is prepared.
  static void drop_persistable_outputs(Program& p) {
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

  FeedMap to_feeds(const io::Batch& batch, const std::vector<std::string>& feed_names = {}) const {
    const auto& names = feed_names.empty() ? model_->feeds() : feed_names;
    if (batch.size() < names.size())
      throw Error(fmt::format("a batch of {} fields cannot feed {} variables ({})", batch.size(), names.size(), fmt::join(names, ", ")));
    FeedMap f;
    for (size_t i = 0; i < names.size(); ++i) f[names[i]] = batch[i];
    return f;
  }

 private:
  const Model* model_;
  std::vector<std::string> fetch_;
  std::set<std::string> fused_away_;
  std::shared_ptr<const Program> program_;
  Executor exe_;
  std::shared_ptr<PreparedBlock> prepared_;
};

}  // namespace oar
