// src/serve/model_store.cpp: see model_store.hpp.
#include "src/serve/model_store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include "oar/core/error.hpp"

namespace oar::serve {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

ModelConfig ModelConfig::read(const fs::path& file) {
  ModelConfig c;
  std::ifstream in(file);
  if (!in) throw Error(fmt::format("cannot read '{}'", file.string()));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("'{}' is not valid JSON: {}", file.string(), e.what()));
  }
  auto bad = [&](const std::string& what) { return Error(fmt::format("'{}': {}", file.string(), what)); };
  if (!j.is_object()) throw bad("expected a JSON object");
  auto positive = [&](const nlohmann::json& v, const char* key) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0) throw bad(fmt::format("\"{}\" must be a non-negative integer", key));
    return v.get<int64_t>();
  };
  auto names = [&](const nlohmann::json& v, const char* key) {
    std::vector<std::string> out;
    if (!v.is_array()) throw bad(fmt::format("\"{}\" must be a list of names", key));
    for (auto& n : v) {
      if (!n.is_string() || n.get<std::string>().empty()) throw bad(fmt::format("\"{}\" must be a list of non-empty names", key));
      out.push_back(n.get<std::string>());
    }
    return out;
  };
  for (auto& [key, v] : j.items()) {
    if (key == "evaluators") {
      c.evaluators = int(positive(v, "evaluators"));
      if (c.evaluators < 1 || c.evaluators > 256) throw bad("\"evaluators\" must be 1 .. 256");
    } else if (key == "dynamic_batching") {
      if (!v.is_object()) throw bad("\"dynamic_batching\" must be an object {\"max_batch_size\": N, \"window_us\": T}");
      c.max_batch_size = 8;
      for (auto& [k2, v2] : v.items()) {
        if (k2 == "max_batch_size") c.max_batch_size = positive(v2, "max_batch_size");
        else if (k2 == "window_us") c.window_us = positive(v2, "window_us");
        else throw bad(fmt::format("unknown field \"dynamic_batching.{}\" (max_batch_size, window_us)", k2));
      }
      if (c.max_batch_size < 1) throw bad("\"max_batch_size\" must be at least 1");
    } else if (key == "inputs") {
      c.inputs = names(v, "inputs");
    } else if (key == "outputs") {
      c.outputs = names(v, "outputs");
    } else {
      throw bad(fmt::format("unknown field \"{}\" (evaluators, dynamic_batching, inputs, outputs)", key));
    }
  }
  return c;
}

namespace {

std::vector<TensorSpec> specs(const Program& p, const std::vector<std::string>& vars, const std::vector<std::string>& rename, const char* what,
                              const fs::path& dir) {
  if (!rename.empty() && rename.size() != vars.size())
    throw Error(fmt::format("model '{}': config.json names {} {} but the model has {}", dir.string(), rename.size(), what, vars.size()));
  std::vector<TensorSpec> out;
  for (size_t i = 0; i < vars.size(); ++i) {
    const Variable& v = p.global_block().var(vars[i]);
    if (v.lod_level() > 0)
      throw Error(fmt::format("model '{}': {} '{}' is a sequence (lod_level {}); the server takes dense tensors only", dir.string(), what, vars[i],
                              v.lod_level()));
    out.push_back({rename.empty() ? vars[i] : rename[i], vars[i], v.dtype(), v.shape().dims()});
  }
  return out;
}

}  // namespace

ModelVersion::ModelVersion(std::string name, int64_t version, const fs::path& dir, ModelConfig config, ModelMetrics& metrics)
    : name_(std::move(name)), version_(version), config_(std::move(config)), metrics_(metrics) {
  model_ = std::make_unique<Model>(Model::load_inference(dir));
  inputs_ = specs(model_->program(), model_->feeds(), config_.inputs, "inputs", dir);
  outputs_ = specs(model_->program(), model_->outputs(), config_.outputs, "outputs", dir);
  batched_ = true;
  for (auto* list : {&inputs_, &outputs_})
    for (auto& t : *list) batched_ = batched_ && !t.shape.empty() && t.shape[0] == -1;
  if (config_.max_batch_size > 0 && !batched_)
    throw Error(fmt::format("model '{}': config.json asks for dynamic batching, but not every input and output has the batch (-1) as its first dim",
                            dir.string()));
  // Warm-up runs on zeros: one row, and with batching every batch size the batcher may form (each size once up
  // to 32, then the powers of two), so that no request pays for preparing the program or for timing the
  // convolution algorithms of a new shape (oar times them once per shape, docs/runtime.md).
  std::vector<int64_t> sizes{1};
  for (int64_t b = 2; b <= config_.max_batch_size; b = b < 32 ? b + 1 : b * 2) sizes.push_back(b);
  if (config_.max_batch_size > 1 && sizes.back() != config_.max_batch_size) sizes.push_back(config_.max_batch_size);
  std::vector<FeedMap> zeros;
  for (int64_t rows : sizes) {
    FeedMap f;
    for (auto& t : inputs_) {
      std::vector<int64_t> d = t.shape;
      for (size_t k = 0; k < d.size(); ++k) d[k] = d[k] >= 0 ? d[k] : k == 0 && batched_ ? rows : 1;
      Tensor z(Shape(d), t.dtype);
      std::memset(z.raw(), 0, z.bytes());
      f[t.var] = LoDTensor(std::move(z));
    }
    zeros.push_back(std::move(f));
  }
  for (int i = 0; i < config_.evaluators; ++i) {
    evaluators_.push_back(std::make_unique<Evaluator>(*model_));
    try {
      for (auto& f : zeros) evaluators_.back()->forward(f);
    } catch (Error& e) {
      e.add_context(fmt::format("while running model '{}' on zeros after loading it", dir.string()));
      throw;
    }
  }
  for (auto& ev : evaluators_) threads_.emplace_back([this, e = ev.get()] { work(*e); });
}

ModelVersion::~ModelVersion() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  window_cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ModelVersion::submit(InferJob job) {
  ++metrics_.in_flight;
  bool wake_idle = false, wake_gatherer = false;
  {
    std::lock_guard lock(mu_);
    queued_rows_ += job.rows;
    queue_.push_back(std::move(job));
    // A worker gathering a batch takes what is queued when its window closes; it is woken early only when the
    // queue fills its batch. An idle worker is woken only when nobody gathers: one batch, not several small.
    wake_gatherer = gathering_ > 0 && gathered_rows_ + queued_rows_ >= config_.max_batch_size;
    wake_idle = gathering_ == 0 && idle_ > 0;
  }
  if (wake_gatherer) window_cv_.notify_all();
  if (wake_idle) cv_.notify_one();
}

void ModelVersion::work(Evaluator& ev) {
#if defined(__linux__)
  // A gathering worker sleeps until its window's deadline; Linux lets a thread's timed waits run up to 50 us
  // late by default (timer slack), a tenth of a 500 us window, so this thread asks for 1 us.
  if (config_.window_us > 0) prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
#endif
  const auto window = std::chrono::microseconds(config_.window_us);
  const int64_t max_rows = config_.max_batch_size;
  std::vector<InferJob> batch;
  auto take = [&] {
    queued_rows_ -= queue_.front().rows;
    batch.push_back(std::move(queue_.front()));
    queue_.pop_front();
  };
  for (;;) {
    {
      std::unique_lock lock(mu_);
      ++idle_;
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      --idle_;
      if (queue_.empty()) return;  // stopping, nothing left
      take();
      int64_t rows = batch[0].rows;
      const auto deadline = batch[0].arrived + window;
      while (max_rows > 0 && rows < max_rows) {
        if (!queue_.empty()) {
          if (rows + queue_.front().rows > max_rows) break;
          rows += queue_.front().rows;
          take();
          continue;
        }
        if (stop_ || Clock::now() >= deadline) break;
        ++gathering_;
        gathered_rows_ = rows;
        window_cv_.wait_until(lock, deadline);
        --gathering_;
      }
      // Others may be waiting while this one gathered (nobody woke them): the rest of the queue is theirs.
      if (!queue_.empty() && idle_ > 0) cv_.notify_one();
    }
    run(ev, batch);
    batch.clear();
  }
}

namespace {

/// Rows [r0, r1) of t (dim 0), copied.
LoDTensor rows_of(const LoDTensor& t, int64_t r0, int64_t r1) {
  std::vector<int64_t> d = t.shape().dims();
  const size_t row_bytes = d[0] ? t.bytes() / size_t(d[0]) : 0;
  d[0] = r1 - r0;
  Tensor out{Shape(d), t.dtype()};
  if (out.bytes()) std::memcpy(out.raw(), static_cast<const char*>(t.raw()) + size_t(r0) * row_bytes, out.bytes());
  return LoDTensor(std::move(out));
}

}  // namespace

void ModelVersion::run(Evaluator& ev, std::vector<InferJob>& batch) {
  const auto started = Clock::now();
  FeedMap feeds;
  int64_t total = 0;
  for (auto& j : batch) total += j.rows;
  if (batch.size() == 1) {
    for (size_t i = 0; i < inputs_.size(); ++i) feeds[inputs_[i].var] = batch[0].inputs[i];
  } else {
    for (size_t i = 0; i < inputs_.size(); ++i) {
      std::vector<int64_t> d = batch[0].inputs[i].shape().dims();
      d[0] = total;
      Tensor t{Shape(d), inputs_[i].dtype};
      char* at = static_cast<char*>(t.raw());
      for (auto& j : batch) {
        std::memcpy(at, j.inputs[i].raw(), j.inputs[i].bytes());
        at += j.inputs[i].bytes();
      }
      feeds[inputs_[i].var] = LoDTensor(std::move(t));
    }
  }
  std::vector<LoDTensor> out;
  try {
    out = ev.forward(feeds);
    for (auto& o : out)
      if (batch.size() > 1 && (o.shape().empty() || o.dim(0) != total))
        throw Error(fmt::format("an output of {} rows from a batch of {} rows", o.shape().empty() ? 0 : o.dim(0), total));
  } catch (const std::exception& e) {
    if (batch.size() > 1) {  // one request's input may be at fault: answer each alone
      for (auto& j : batch) {
        std::vector<InferJob> one;
        one.push_back(std::move(j));
        run(ev, one);
      }
      return;
    }
    InferResult r;
    r.status = dynamic_cast<const Error*>(&e) ? 400 : 500;
    r.error = fmt::format("model '{}' version {} failed on this request: {}", name_, version_, e.what());
    finish(batch[0], std::move(r), started, Clock::now());
    return;
  }
  const auto ended = Clock::now();
  metrics_.batch_rows.observe(double(total));
  int64_t r0 = 0;
  for (auto& j : batch) {
    InferResult r;
    if (batch.size() == 1) {
      r.outputs = std::move(out);
    } else {
      for (auto& o : out) r.outputs.push_back(rows_of(o, r0, r0 + j.rows));
      r0 += j.rows;
    }
    finish(j, std::move(r), started, ended);
  }
}

void ModelVersion::finish(InferJob& job, InferResult&& r, Clock::time_point started, Clock::time_point ended) {
  auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  metrics_.queue_s.observe(secs(started - job.arrived));
  metrics_.compute_s.observe(secs(ended - started));
  metrics_.request_s.observe(secs(Clock::now() - job.arrived));
  (r.status == 200 ? metrics_.success : metrics_.failure) += 1;
  --metrics_.in_flight;
  auto done = std::move(job.done);
  done(std::move(r));
}

bool valid_model_name(const std::string& name) {
  if (name.empty() || name.size() > 200 || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.'; });
}

std::shared_ptr<ModelVersion> ModelStore::find(const std::string& name, int64_t version) const {
  std::lock_guard lock(mu_);
  auto it = models_.find(name);
  if (it == models_.end() || !it->second.served) return nullptr;
  if (version != 0 && it->second.served->version() != version) return nullptr;
  return it->second.served;
}

void ModelStore::load_all() {
  std::vector<std::string> names;
  std::error_code ec;
  if (!fs::is_directory(repo_, ec)) throw Error(fmt::format("model repository '{}' is not a directory", repo_.string()));
  for (auto& e : fs::directory_iterator(repo_))
    if (e.is_directory() && valid_model_name(e.path().filename().string())) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  for (auto& n : names) load(n);
}

void ModelStore::load(const std::string& name) {
  if (!valid_model_name(name)) throw Error(fmt::format("'{}' is not a model name (letters, digits, '_', '-', '.'; not starting with '.')", name));
  std::lock_guard manage(manage_mu_);
  const fs::path dir = repo_ / name;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(fmt::format("no model '{}' in the repository '{}'", name, repo_.string()));
  int64_t newest = 0;
  for (auto& e : fs::directory_iterator(dir)) {
    const std::string f = e.path().filename().string();
    if (!e.is_directory() || f.empty() || f.size() > 18 || !std::all_of(f.begin(), f.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    newest = std::max<int64_t>(newest, std::stoll(f));
  }
  if (newest == 0) throw Error(fmt::format("model '{}' has no version directory (a number, e.g. '{}/1/')", name, dir.string()));
  if (auto cur = find(name); cur && cur->version() == newest) return;  // already served
  std::shared_ptr<ModelVersion> fresh;
  try {
    ModelConfig cfg = fs::exists(dir / "config.json") ? ModelConfig::read(dir / "config.json") : ModelConfig{};
    fresh = std::make_shared<ModelVersion>(name, newest, dir / std::to_string(newest), std::move(cfg), metrics_.model(name, newest));
  } catch (Error& e) {
    std::lock_guard lock(mu_);
    if (!models_[name].served) models_[name].reason = e.what();
    throw;
  }
  std::shared_ptr<ModelVersion> old;
  {
    std::lock_guard lock(mu_);
    old = std::exchange(models_[name].served, fresh);
    models_[name].reason.clear();
  }
  // `old` is released here: its destructor answers what it still queues; requests holding it keep it alive.
}

void ModelStore::unload(const std::string& name) {
  if (!valid_model_name(name)) throw Error(fmt::format("'{}' is not a model name", name));
  std::lock_guard manage(manage_mu_);
  std::shared_ptr<ModelVersion> old;
  {
    std::lock_guard lock(mu_);
    auto it = models_.find(name);
    if (it == models_.end() || !it->second.served) throw Error(fmt::format("model '{}' is not loaded", name));
    old = std::exchange(it->second.served, nullptr);
    it->second.reason = "unloaded";
  }
}

void ModelStore::unload_all() {
  std::lock_guard manage(manage_mu_);
  std::vector<std::shared_ptr<ModelVersion>> old;  // released after the lock: their destructors join threads
  {
    std::lock_guard lock(mu_);
    for (auto& [n, e] : models_)
      if (e.served) {
        old.push_back(std::exchange(e.served, nullptr));
        e.reason = "unloaded";
      }
  }
}

std::vector<ModelStatus> ModelStore::index() const {
  std::map<std::string, ModelStatus> all;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(repo_, ec))
    if (e.is_directory() && valid_model_name(e.path().filename().string()))
      all[e.path().filename().string()] = {e.path().filename().string(), 0, "UNAVAILABLE", "not loaded"};
  std::lock_guard lock(mu_);
  for (auto& [n, e] : models_) {
    if (e.served) all[n] = {n, e.served->version(), "READY", ""};
    else all[n] = {n, 0, "UNAVAILABLE", e.reason};
  }
  std::vector<ModelStatus> out;
  for (auto& [n, s] : all) out.push_back(s);
  return out;
}

}  // namespace oar::serve
