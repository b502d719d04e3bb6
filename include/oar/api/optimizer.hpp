// oar/api/optimizer.hpp: Optimizer = {Model&, update rule}: the training loop with events, `update` from
// gradients, checkpoints that resume exactly, and a concurrent mode (N threads, each a GradientMachine on
// its own mini-batch, gradients summed in a fixed order before each update).
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "oar/config.hpp"
#include "oar/api/gradient_machine.hpp"
#include "oar/api/model.hpp"
#include "oar/device/communicator.hpp"
#include "oar/io/dataset.hpp"
#include "oar/optim/collective.hpp"
#include "oar/optim/optimizer.hpp"
#include "oar/runtime/executor.hpp"

namespace oar {

/// What the training loop reports to `on_event`.
struct Event {
  enum class Kind { begin_pass, end_pass, begin_iteration, end_iteration } kind;
  int64_t pass = 0;       ///< epoch, from 0
  int64_t iteration = 0;  ///< batch within the pass, from 0
  int64_t step = 0;       ///< updates so far (step_count()), over all passes and calls
  double loss = 0;        ///< end_iteration: the batch's loss; end_pass: the pass's mean loss
  std::map<std::string, double> metrics;  ///< the model's other scalar outputs (e.g. accuracy), likewise
  double seconds = 0;     ///< end_iteration: this step's time; end_pass: the pass's time
};
using EventHandler = std::function<void(const Event&)>;

/// Data-parallel training over the ranks of a communicator: what oar::dist::data_parallel(ctx) returns
/// (dist/context.hpp; docs/distributed.md).
struct DataParallel {
  /// The ranks; the collective ops of ring `collective.ring_id` must find it (dist::Context registers ring 0).
  std::shared_ptr<Communicator> comm;
  int rank = 0;
  optim::Collective collective;
  /// The communicator for tensors on a GPU (NCCL's), made when an Optimizer on that GPU asks for it; the
  /// Optimizer keeps it in `device_comm`. `comm` still carries the host's values (metrics, checkpoints).
  std::function<std::shared_ptr<Communicator>(const Place&)> on_device;
  std::shared_ptr<Communicator> device_comm;

  /// Gradients travel in buckets of at least `bytes` (default 25 MB).
  DataParallel& bucket_bytes(int64_t bytes) {
    collective.bucket_bytes = bytes;
    return *this;
  }
  /// false: every bucket is summed after the backward pass (no overlap).
  DataParallel& overlap(bool on) {
    collective.overlap = on;
    return *this;
  }
  /// Batch norms take their statistics over the global batch (sync_batch_norm) instead of each rank's own.
  DataParallel& sync_batch_norm(bool on = true) {
    collective.sync_batch_norm = on;
    return *this;
  }
  /// ZeRO stage 1: each parameter is updated by one rank (parameters dealt out by size), which alone keeps its
  /// optimizer state and then broadcasts the new values; optimizer-state memory per rank falls as 1 / ranks.
  DataParallel& shard_optimizer_state(bool on = true) {
    shard_state = on;
    return *this;
  }
  bool shard_state = false;
};

/// Trains a model: `oar::Optimizer opt(model, cost, oar::optim::adam(1e-3)); opt.train(reader, {x, label}, 5);`
class Optimizer {
 public:
  /// Minimizes `loss` (a Var of the model's tape) of `model` with `rule`; `threads` > 1 trains concurrently.
  Optimizer(Model& model, const Var& loss, optim::Rule rule, int threads = 1);
  Optimizer(Model& model, std::string loss, optim::Rule rule, int threads = 1);
  /// Trains on every rank of `dp` (oar::dist::data_parallel(ctx)) as one optimizer: parameters and
  /// persistables are broadcast from rank 0 here; each step's gradients are averaged over the ranks (each
  /// rank feeds its own part of the global batch) while the backward pass runs; parameters and optimizer
  /// state stay the same bits on every rank. step() and train() report losses and metrics averaged over the
  /// ranks; checkpoint() is written by rank 0 (the others wait for it). docs/distributed.md.
  Optimizer(Model& model, const Var& loss, optim::Rule rule, DataParallel dp);
  Optimizer(Model& model, std::string loss, optim::Rule rule, DataParallel dp);

  Model& model() const { return *model_; }
  const optim::Rule& rule() const { return rule_; }
  /// Switches to mixed-precision training (the same as constructing with `rule.with_mixed_precision(m)`):
  /// the machines and the update program are built again; parameters and accumulators are kept.
  Optimizer& with_mixed_precision(optim::MixedPrecision m = {});
  /// The current loss scale (mixed precision; 1 without it).
  float loss_scale() const;
  GradientMachine& machine(size_t i = 0) const { return *machines_.at(i); }
  const Program& update_program() const { return *update_; }
  /// The epoch train() is in or starts next (passes over the reader so far, from 0); checkpoints keep it.
  int64_t epoch() const { return epoch_; }
  /// Updates applied so far, however they were made: step(), step_async(), update() and each iteration of
  /// train(); checkpoints keep it, and Event::step continues from it.
  int64_t step_count() const { return step_; }
  /// The data-parallel setup, when training over several ranks.
  const std::optional<DataParallel>& data_parallel() const { return dp_; }

  /// One iteration on one batch: forward, backward, update. Returns the loss and other fetched outputs.
  std::vector<LoDTensor> step(const FeedMap& feeds);
  /// The same into `out` (its storage reused: a step whose shapes repeat allocates nothing on the heap).
  void step(const FeedMap& feeds, std::vector<LoDTensor>& out);
  /// One iteration queued without waiting for it: on a GPU it returns once the pass and the update are queued,
  /// with the fetched values on their way (PendingFetch::wait). A loop that queues step k+1 before it reads
  /// step k's loss keeps the GPU busy while the host prepares the next step. Feeds in page-locked memory must not
  /// be written until their step's values have arrived (ordinary ones are copied before it returns). On the
  /// CPU the step has run when it returns.
  PendingFetch step_async(const FeedMap& feeds);
  /// Applies the gradients currently held by `gm` (e.g. after gm.forward_backward).
  void update(GradientMachine& gm) { apply_update(gm); }
  /// Applies explicit gradients (param name -> gradient).
  void update(const std::map<std::string, LoDTensor>& gradients);
  /// The same with dense or sparse gradients, as GradientMachine::gradients() gives them.
  void update(const std::map<std::string, Gradient>& gradients);

  /// Trains `epochs` more passes over `reader` (batches whose fields feed `feeds` in order): epoch() goes from
  /// e to e + epochs, so `train(r, f, 1)` twice trains two passes. A run cut short (an exception out of train()
  /// or on_event, or a checkpoint written during train() and then resume()d) is finished instead: the call
  /// trains, from the reader's saved position, until that run's first epoch + `epochs`, so after
  /// `opt.resume(path, &r)` the crashed run's own `opt.train(r, f, 3)` completes its 3 passes. A call that
  /// would train nothing (`epochs` < 1, or a cut-short run already past that many passes) is an oar::Error.
  void train(io::Reader& reader, std::span<const Var> feeds, int epochs, const EventHandler& on_event = {},
             std::source_location loc = std::source_location::current());
  void train(io::Reader& reader, std::initializer_list<Var> feeds, int epochs, const EventHandler& on_event = {},
             std::source_location loc = std::source_location::current()) {
    train(reader, std::span<const Var>(feeds), epochs, on_event, loc);
  }
  void train(io::Reader& reader, const std::vector<std::string>& feeds, int epochs, const EventHandler& on_event = {},
             std::source_location loc = std::source_location::current());

  /// Saves programs, every persistable (parameters, accumulators, learning-rate state), the epoch, step_count()
  /// and the first epoch of an unfinished train() run, the random state and `reader`'s position (the reader
  /// being trained when called from an event) to one file, atomically.
  void checkpoint(const std::filesystem::path& path, const io::Reader* reader = nullptr) const;
  /// Restores what checkpoint() saved (the model must have the same parameters); `reader` is moved to the
  /// saved position, so train() continues exactly where the saved run was.
  void resume(const std::filesystem::path& path, io::Reader* reader = nullptr);

 private:
  void build_update();
  void build_machines(const std::string& loss, int threads);
  void apply_update(GradientMachine& gm);
  /// Data parallel: every persistable of the model copied from rank 0.
  void broadcast_persistables();
  /// Data parallel: the mean over the ranks of `values` (in place).
  void average_over_ranks(std::vector<double>& values) const;
  /// Forward/backward of each batch on its own machine (in parallel), gradients summed into machine 0,
  /// one update. Returns the mean loss and mean metrics.
  std::pair<double, std::map<std::string, double>> run_batches(const std::vector<io::Batch>& batches, const std::vector<std::string>& feeds);

  Model* model_;
  optim::Rule rule_;
  std::vector<std::unique_ptr<GradientMachine>> machines_;
  std::shared_ptr<const Program> update_;
  Executor update_exe_;
  std::vector<std::shared_ptr<PreparedBlock>> update_runs_;
  std::vector<uint64_t> update_plans_;  // the machine's plan each update run was prepared in (its scope)
  std::vector<LoDTensor> update_out_;  // always empty: the update fetches nothing
  std::string lr_name_;
  int64_t epoch_ = 0;
  int64_t step_ = 0;
  int64_t run_start_ = -1;  // the first epoch of a train() run not finished yet (cut short); -1: none
  io::Reader* reader_ = nullptr;
  std::optional<DataParallel> dp_;
  // ZeRO stage 1 (DataParallel::shard_optimizer_state): who updates each parameter, the program that then
  // broadcasts every parameter from its owner, and every rank's optimizer state (names, shapes, owners), which
  // checkpoints gather on rank 0.
  std::map<std::string, int> owner_;
  std::vector<optim::BroadcastVar> sharded_state_;
  std::shared_ptr<PreparedBlock> gather_run_;
  /// ZeRO: the update program's parameters and gradients on this rank (the ones it owns).
  std::vector<ParamGrad> owned_params_grads() const;
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/api/optimizer-inl.hpp"
#endif
