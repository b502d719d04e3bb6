// src/serve/model_store.hpp: the model repository as the server holds it. Each served model version owns its
// Model (the parameters, once), N evaluators on threads of their own and the queue they take requests from,
// batching requests that arrive within the configured window. Versions are shared_ptrs: a request holds its
// version until it is answered, so a version replaced by a load or dropped by an unload finishes what it took.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "oar/api/evaluator.hpp"
#include "oar/api/model.hpp"
#include "oar/serve/server.hpp"
#include "src/serve/metrics.hpp"

namespace oar::serve {

/// A model input or output as clients see it.
struct TensorSpec {
  std::string name;  ///< the public name (config.json may rename the program's variable)
  std::string var;   ///< the program's variable
  DType dtype = DType::f32;
  std::vector<int64_t> shape;  ///< -1: any size
};

/// REPO/<model>/config.json. Every field optional.
struct ModelConfig {
  int evaluators = 1;
  int64_t max_batch_size = 0;  ///< dynamic batching when > 0: rows of one batch at most
  int64_t window_us = 0;       ///< how long the first request of a batch waits for others
  std::vector<std::string> inputs, outputs;  ///< public names of the feeds / fetches, in order
  /// oar::Error naming the file and field when it is malformed.
  static ModelConfig read(const std::filesystem::path& file);
};

struct InferResult {
  int status = 200;
  std::string error;
  std::vector<LoDTensor> outputs;  ///< the model's fetches, in order
};

struct InferJob {
  std::vector<LoDTensor> inputs;  ///< the model's feeds, in order, checked against their specs
  int64_t rows = 1;               ///< dim 0 of every input when the model is batched
  std::chrono::steady_clock::time_point arrived;
  std::function<void(InferResult&&)> done;  ///< called once, on a model thread
};

class ModelVersion {
 public:
  /// Loads `dir` (an inference model), starts the evaluators and runs each once on zeros, so the first
  /// request does not pay for preparing the program. oar::Error when the files or config are bad.
  ModelVersion(std::string name, int64_t version, const std::filesystem::path& dir, ModelConfig config, ModelMetrics& metrics);
  /// Answers what is queued, then stops the threads.
  ~ModelVersion();
  ModelVersion(const ModelVersion&) = delete;
  ModelVersion& operator=(const ModelVersion&) = delete;

  const std::string& name() const { return name_; }
  int64_t version() const { return version_; }
  const std::vector<TensorSpec>& inputs() const { return inputs_; }
  const std::vector<TensorSpec>& outputs() const { return outputs_; }
  /// Whether dim 0 of every input and output is the batch (so requests of several rows, and batching, work).
  bool batched() const { return batched_; }
  const ModelConfig& config() const { return config_; }
  ModelMetrics& metrics() const { return metrics_; }

  void submit(InferJob job);

 private:
  void work(Evaluator& ev);
  void run(Evaluator& ev, std::vector<InferJob>& batch);
  void finish(InferJob& job, InferResult&& r, std::chrono::steady_clock::time_point started, std::chrono::steady_clock::time_point ended);

  std::string name_;
  int64_t version_;
  ModelConfig config_;
  ModelMetrics& metrics_;
  std::unique_ptr<Model> model_;
  std::vector<TensorSpec> inputs_, outputs_;
  bool batched_ = false;
  std::vector<std::unique_ptr<Evaluator>> evaluators_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;         // idle workers: a first request
  std::condition_variable window_cv_;  // a worker gathering a batch: enough queued to fill it
  std::deque<InferJob> queue_;
  int64_t queued_rows_ = 0, gathered_rows_ = 0;  // rows queued; rows of the batch last being gathered
  int idle_ = 0, gathering_ = 0;
  bool stop_ = false;
};

/// Model names a request may use: letters, digits, '_', '-', '.', not starting with '.', so that no name
/// leaves the repository directory.
bool valid_model_name(const std::string& name);

class ModelStore {
 public:
  ModelStore(std::filesystem::path repo, Metrics& metrics) : repo_(std::move(repo)), metrics_(metrics) {}
  /// The version served of `name` (`version` 0: whichever it is), or nullptr.
  std::shared_ptr<ModelVersion> find(const std::string& name, int64_t version = 0) const;
  /// Every model directory of the repository; an oar::Error for the first that fails.
  void load_all();
  void load(const std::string& name);
  void unload(const std::string& name);
  /// Stops serving every model (each version goes once its requests in flight are answered).
  void unload_all();
  std::vector<ModelStatus> index() const;
  const std::filesystem::path& repo() const { return repo_; }

 private:
  struct Entry {
    std::shared_ptr<ModelVersion> served;
    std::string reason;  ///< why nothing is served
  };
  std::filesystem::path repo_;
  Metrics& metrics_;
  mutable std::mutex mu_;     // models_
  std::mutex manage_mu_;      // one load or unload at a time
  std::map<std::string, Entry> models_;
};

}  // namespace oar::serve
