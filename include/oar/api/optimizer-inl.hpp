// oar/api/optimizer-inl.hpp: the implementation of optimizer.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/api/optimizer.hpp"

#include <chrono>
#include <exception>
#include <set>
#include <thread>
#include <type_traits>

#include "oar/core/error.hpp"
#include "oar/io/checkpoint.hpp"
#include "oar/ir/serialize.hpp"

namespace oar {

OAR_FUNC Optimizer::Optimizer(Model& model, const Var& loss, optim::Rule rule, int threads)
    : Optimizer(model, model.name_of(loss), std::move(rule), threads) {}

OAR_FUNC Optimizer::Optimizer(Model& model, std::string loss, optim::Rule rule, int threads)
    : model_(&model), rule_(std::move(rule)), update_exe_(model.place()) {
  OAR_CHECK(threads >= 1, "Optimizer: threads must be >= 1, got {}", threads);
  // The threads' gradients are summed on the host, and one device gains little from several host threads.
  OAR_CHECK(threads == 1 || !model.place().is_cuda(), "Optimizer: a model on {} trains with one thread, not {} (threads > 1 is for the CPU)",
            model.place().str(), threads);
  build_machines(loss, threads);
  build_update();
}

OAR_FUNC Optimizer::Optimizer(Model& model, const Var& loss, optim::Rule rule, DataParallel dp)
    : Optimizer(model, model.name_of(loss), std::move(rule), std::move(dp)) {}

OAR_FUNC Optimizer::Optimizer(Model& model, std::string loss, optim::Rule rule, DataParallel dp)
    : model_(&model), rule_(std::move(rule)), update_exe_(model.place()) {
  OAR_CHECK(dp.comm != nullptr, "Optimizer: data parallel without a communicator (use oar::dist::data_parallel(ctx))");
  OAR_CHECK(dp.comm->size() == dp.collective.nranks, "Optimizer: data parallel over {} ranks, but the communicator has {} ({})", dp.collective.nranks,
            dp.comm->size(), dp.comm->describe());
  if (model.place().is_cuda() && dp.collective.nranks > 1) {  // the gradients are summed on the GPU, by NCCL
    OAR_CHECK(!dp.collective.sync_batch_norm, "Optimizer: sync_batch_norm has no CUDA kernels yet: data parallel on {} keeps per-rank batch norm "
              "statistics (leave .sync_batch_norm() off)", model.place().str());
    OAR_CHECK(dp.on_device != nullptr, "Optimizer: data parallel on {} needs a GPU communicator (use oar::dist::data_parallel(ctx))", model.place().str());
    dp.device_comm = dp.on_device(model.place());
    OAR_CHECK(dp.device_comm && dp.device_comm->size() == dp.collective.nranks, "Optimizer: data parallel over {} ranks, but {}'s communicator has {}",
              dp.collective.nranks, model.place().str(), dp.device_comm ? dp.device_comm->size() : 0);
  }
  OAR_CHECK(!rule_.mixed_precision || dp.collective.nranks == 1, "Optimizer: mixed precision and data parallel together are not supported yet");
  if (dp.shard_state) {  // each rank clips only the gradients it owns: a global norm would be its share's
    OAR_CHECK(!rule_.clip || rule_.clip->kind != GradientClip::Kind::global_norm,
              "Optimizer: sharded optimizer state (ZeRO) does not support clipping by the global norm yet");
    for (auto* v : model.program().global_block().vars())
      OAR_CHECK(!v->param() || v->param()->gradient_clip != "global_norm",
                "Optimizer: sharded optimizer state (ZeRO) does not support clipping by the global norm yet (parameter '{}')", v->name());
  }
  dp.collective.reduce_to_owner = dp.shard_state;
  if (dp.collective.nranks > 1) dp_ = std::move(dp);
  build_machines(loss, 1);
  build_update();
  if (dp_) broadcast_persistables();
}

OAR_FUNC void Optimizer::broadcast_persistables() {
  std::set<std::string> sharded;  // ZeRO: each rank holds only its own parameters' optimizer state
  for (auto& v : sharded_state_) sharded.insert(v.name);
  std::vector<optim::BroadcastVar> vars;
  for (auto& [n, t] : model_->persistables())
    if (!sharded.count(n)) vars.push_back({n, t.dtype(), t.shape()});
  Executor exe(model_->place());
  exe.run(optim::broadcast_program(vars, dp_->collective), model_->scope());
}

OAR_FUNC void Optimizer::average_over_ranks(std::vector<double>& values) const {
  if (!dp_ || values.empty()) return;
  dp_->comm->all_reduce_sum(values.data(), int64_t(values.size()), DType::f64, "averaging the loss and metrics over the ranks");
  for (double& v : values) v /= double(dp_->collective.nranks);
}

OAR_FUNC void Optimizer::build_machines(const std::string& loss, int threads) {
  if (rule_.mixed_precision) {
    // One overflow flag per step: the concurrent mode's machines would each need their own.
    OAR_CHECK(threads == 1, "Optimizer: mixed precision trains with one thread, not {}", threads);
    Program main, startup;  // the loss scale exists before the machines' programs read it
    optim::declare_loss_scaling(main, startup, *rule_.mixed_precision);
    model_->initialize(startup);
  }
  std::vector<std::string> extra;
  for (auto& o : model_->outputs())
    if (o != loss) extra.push_back(o);
  machines_.clear();
  for (int i = 0; i < threads; ++i) {
    // Each rank draws its own dropout masks.
    const uint64_t rank_seed = dp_ ? 1000003ull * uint64_t(dp_->rank) : 0;
    machines_.push_back(std::make_unique<GradientMachine>(*model_, loss, extra, model_->seed() + 1000 + uint64_t(i) + rank_seed));
    if (rule_.mixed_precision) machines_.back()->amp_ = rule_.mixed_precision;
    if (dp_) machines_.back()->collective_ = dp_->collective;
    if (rule_.mixed_precision || dp_) machines_.back()->build();
  }
}

OAR_FUNC Optimizer& Optimizer::with_mixed_precision(optim::MixedPrecision m) {
  // Checked before anything changes: a refused call leaves the optimizer as it was.
  OAR_CHECK(machines_.size() == 1, "Optimizer: mixed precision trains with one thread, not {}", machines_.size());
  OAR_CHECK(!dp_, "Optimizer: mixed precision and data parallel together are not supported yet");
  {
    Program main, startup;
    optim::declare_loss_scaling(main, startup, m);  // throws on bad options
  }
  rule_.with_mixed_precision(m);
  const std::string loss = machines_.at(0)->loss_;
  const int threads = int(machines_.size());
  update_runs_.clear();
  update_plans_.clear();
  build_machines(loss, threads);
  build_update();
  return *this;
}

OAR_FUNC float Optimizer::loss_scale() const {
  if (!rule_.mixed_precision) return 1.f;
  Value* v = model_->scope().find(optim::kLossScaling);
  OAR_CHECK(v && v->is_tensor() && v->tensor().initialized(), "loss_scale: the loss scale has no value");
  return v->tensor().to(cpu()).data<float>()[0];
}

OAR_FUNC std::vector<LoDTensor> Optimizer::step(const FeedMap& feeds) {
  std::vector<LoDTensor> out;
  step(feeds, out);
  return out;
}

OAR_FUNC void Optimizer::step(const FeedMap& feeds, std::vector<LoDTensor>& out) {
  machines_[0]->forward_backward(feeds, out);
  apply_update(*machines_[0]);
  if (!dp_) return;
  const auto scalar = [](const LoDTensor& t) { return t.numel() == 1 && (t.dtype() == DType::f32 || t.dtype() == DType::f64); };
  std::vector<double> scalars;
  for (auto& t : out)
    if (scalar(t)) scalars.push_back(t.get(0));
  average_over_ranks(scalars);
  size_t k = 0;
  for (auto& t : out)
    if (scalar(t)) {
      if (t.dtype() == DType::f32) t.data<float>()[0] = float(scalars[k++]);
      else t.data<double>()[0] = scalars[k++];
    }
}

OAR_FUNC PendingFetch Optimizer::step_async(const FeedMap& feeds) {
  // The update follows the pass on the device, so it is queued before anything waits for the fetches: the GPU
  // goes on to it without a round trip through the host.
  std::vector<LoDTensor> out;
  Fence arrived;
  machines_[0]->forward_backward(feeds, out, arrived);
  apply_update(*machines_[0]);
  return PendingFetch(std::move(out), std::move(arrived));
}

namespace detail {
inline constexpr const char* kUpdateUnderMixedPrecision =
    "update: explicit gradients cannot be applied under mixed precision (the step's overflow check runs in the backward pass)";

/// Puts each parameter's gradient, taken from `gradients` by the parameter's name, into its gradient variable
/// of `gm` with `put(value, given)`; a parameter without one is an oar::Error.
template <class G, class Put>
void put_given_gradients(GradientMachine& gm, const std::map<std::string, G>& gradients, Put put) {
  for (auto& [p, g] : gm.params_grads()) {
    auto it = gradients.find(p);
    OAR_CHECK(it != gradients.end(), "update: no gradient given for parameter '{}'", p);
    put(gm.scope().var(g), it->second);
  }
}

inline void put_dense_gradient(Value& v, const LoDTensor& t) {
  if (!v.is_tensor()) v.reset();
  v.tensor() = t;
}
}  // namespace detail

OAR_FUNC void Optimizer::update(const std::map<std::string, LoDTensor>& gradients) {
  OAR_CHECK(!rule_.mixed_precision, detail::kUpdateUnderMixedPrecision);
  detail::put_given_gradients(*machines_[0], gradients, detail::put_dense_gradient);
  apply_update(*machines_[0]);
}

OAR_FUNC void Optimizer::update(const std::map<std::string, Gradient>& gradients) {
  OAR_CHECK(!rule_.mixed_precision, detail::kUpdateUnderMixedPrecision);
  detail::put_given_gradients(*machines_[0], gradients, [](Value& v, const Gradient& g) {
    if (!g.sparse) return detail::put_dense_gradient(v, g.dense);
    if (!v.is_selected_rows()) v.reset();
    v.selected_rows() = SelectedRows{g.rows, g.height, g.values};
  });
  apply_update(*machines_[0]);
}

OAR_FUNC void Optimizer::train(io::Reader& reader, std::span<const Var> feeds, int epochs, const EventHandler& on_event, std::source_location loc) {
  train(reader, model_->names_of(feeds), epochs, on_event, loc);
}

OAR_FUNC void Optimizer::train(io::Reader& reader, const std::vector<std::string>& feeds, int epochs, const EventHandler& on_event,
                               std::source_location loc) {
  using clock = std::chrono::steady_clock;
  const Origin where(loc, "Optimizer::train");
  if (epochs < 1) throw Error(fmt::format("train: epochs is the number of passes to train and must be >= 1, got {}", epochs), where);
  // A run cut short is finished, not begun again: its own call, repeated after resume(), completes its plan.
  const int64_t start = run_start_ >= 0 ? run_start_ : epoch_;
  const int64_t until = start + epochs;
  if (until <= epoch_)
    throw Error(fmt::format("train: this call continues a run cut short (resumed from a checkpoint, or stopped by an exception) that "
                            "began at epoch {} and has reached epoch {}, so {} epoch(s) would train nothing; ask for more than {}",
                            start, epoch_, epochs, epoch_ - start),
                where);
  run_start_ = start;
  reader_ = &reader;
  struct Release {  // the reader may not outlive the call: no later checkpoint() may read it
    io::Reader*& r;
    ~Release() { r = nullptr; }
  } release{reader_};
  while (epoch_ < until) {
    if (reader.epoch() != epoch_) reader.restore({epoch_, 0});
    int64_t iteration = reader.position();
    if (on_event) on_event({Event::Kind::begin_pass, epoch_, iteration, step_});
    auto pass_start = clock::now();
    double loss_sum = 0, n = 0;
    std::map<std::string, double> metric_sum;
    bool done = false;
    while (!done) {
      std::vector<io::Batch> batches;
      for (size_t k = 0; k < machines_.size(); ++k) {
        auto b = reader.next();
        if (!b) {
          done = true;
          break;
        }
        batches.push_back(std::move(*b));
      }
      if (batches.empty()) break;
      if (on_event) on_event({Event::Kind::begin_iteration, epoch_, iteration, step_});
      auto t0 = clock::now();
      auto [loss, metrics] = run_batches(batches, feeds);  // counts the step
      if (dp_) {
        std::vector<double> v{loss};
        for (auto& [k, m] : metrics) v.push_back(m);
        average_over_ranks(v);
        loss = v[0];
        size_t j = 1;
        for (auto& [k, m] : metrics) m = v[j++];
      }
      Event e{Event::Kind::end_iteration, epoch_, iteration, step_, loss, metrics, std::chrono::duration<double>(clock::now() - t0).count()};
      loss_sum += loss;
      for (auto& [k, v] : metrics) metric_sum[k] += v;
      n += 1;
      iteration += int64_t(batches.size());
      if (on_event) on_event(e);
    }
    Event e{Event::Kind::end_pass, epoch_, iteration, step_, n ? loss_sum / n : 0, {}, std::chrono::duration<double>(clock::now() - pass_start).count()};
    for (auto& [k, v] : metric_sum) e.metrics[k] = v / n;
    // The pass is over before on_event hears of it: a checkpoint written there resumes after it, not in it.
    if (++epoch_ == until) run_start_ = -1;
    if (on_event) on_event(e);
  }
}

OAR_FUNC void Optimizer::checkpoint(const std::filesystem::path& path, const io::Reader* reader) const {
  io::Checkpoint c;
  const io::Reader* r = reader ? reader : reader_;
  c.meta["epoch"] = std::to_string(epoch_);
  c.meta["step"] = std::to_string(step_);
  c.meta["run_start"] = std::to_string(run_start_);
  c.meta["reader_epoch"] = std::to_string(r ? r->epoch() : epoch_);
  c.meta["reader_position"] = std::to_string(r ? r->position() : 0);
  c.meta["threads"] = std::to_string(machines_.size());
  for (size_t i = 0; i < machines_.size(); ++i) {
    const DeviceContext& d = machines_[i]->executor().device();
    c.meta["rng" + std::to_string(i)] = std::to_string(d.counter());
    c.meta["seed" + std::to_string(i)] = std::to_string(d.seed());
  }
  c.meta["world_size"] = std::to_string(dp_ ? dp_->collective.nranks : 1);
  c.blobs["main"] = serialize(model_->program());
  c.blobs["startup"] = serialize(model_->startup());
  c.blobs["update"] = serialize(*update_);
  c.tensors = model_->persistables();
  if (!sharded_state_.empty()) {  // ZeRO: every rank's optimizer state, brought to rank 0 (all ranks take part)
    std::map<std::string, LoDTensor> have(c.tensors.begin(), c.tensors.end());
    for (auto& v : sharded_state_) {
      LoDTensor t;
      if (v.root == dp_->rank) t = have.at(v.name);
      else t = LoDTensor(Tensor(v.shape, v.dtype, cpu()));
      dp_->comm->broadcast(t.raw(), int64_t(t.bytes()), v.root, fmt::format("checkpoint: the optimizer state '{}' from rank {}", v.name, v.root));
      have[v.name] = t;
    }
    c.tensors.assign(have.begin(), have.end());
  }
  // Data parallel: every rank holds the same state, rank 0 writes it, and the others wait until it is written
  // (so a resume right after reads the new file). A failed write fails every rank.
  std::string failure;
  if (!dp_ || dp_->rank == 0) {
    try {
      io::save_checkpoint(path, c);
    } catch (const Error& e) {
      if (!dp_) throw;
      failure = e.what();
    }
  }
  if (dp_) {
    std::vector<double> bad{failure.empty() ? 0.0 : 1.0};
    average_over_ranks(bad);
    if (!failure.empty()) throw Error(failure);
    if (bad[0] > 0) throw Error(fmt::format("checkpoint '{}': rank 0 could not write it", path.string()));
  }
}

OAR_FUNC void Optimizer::resume(const std::filesystem::path& path, io::Reader* reader) {
  io::Checkpoint c = io::load_checkpoint(path);
  auto num = [&](const char* k) -> int64_t {
    auto it = c.meta.find(k);
    if (it == c.meta.end()) throw Error(fmt::format("checkpoint '{}' lacks '{}'", path.string(), k));
    return std::stoll(it->second);
  };
  OAR_CHECK(size_t(num("threads")) == machines_.size(), "checkpoint '{}' was written with {} threads, this optimizer has {}", path.string(),
            num("threads"), machines_.size());
  std::set<std::string> elsewhere;  // ZeRO: other ranks' optimizer state, which this rank does not keep
  for (auto& v : sharded_state_)
    if (v.root != dp_->rank) elsewhere.insert(v.name);
  for (auto& [n, t] : c.tensors) {
    if (elsewhere.count(n)) continue;
    Value* v = model_->scope().find(n);
    if (!v) throw Error(fmt::format("checkpoint '{}' holds '{}', which this model does not have", path.string(), n));
    if (v->tensor().initialized() && v->tensor().shape() != t.shape())
      throw Error(fmt::format("checkpoint '{}': '{}' has shape {} but the model's is {}", path.string(), n, t.shape().str(), v->tensor().shape().str()));
    if (!v->tensor().initialized()) v->tensor().resize(t.shape(), t.dtype(), model_->place());  // on the model's place, not the file's
    v->tensor().copy_from(t);
  }
  epoch_ = num("epoch");
  step_ = num("step");
  // Files written before train() counted passes held no run_start: their train(r, f, n) meant "until epoch n".
  run_start_ = c.meta.count("run_start") ? num("run_start") : 0;
  for (size_t i = 0; i < machines_.size(); ++i) {
    DeviceContext& d = machines_[i]->executor().device();
    // Data parallel: the ranks keep seeds of their own (the file holds rank 0's).
    if (!dp_) d.set_seed(uint64_t(num(("seed" + std::to_string(i)).c_str())));
    d.set_counter(uint64_t(num(("rng" + std::to_string(i)).c_str())));
  }
  if (reader) reader->restore({num("reader_epoch"), num("reader_position")});
}

OAR_FUNC std::vector<ParamGrad> Optimizer::owned_params_grads() const {
  std::vector<ParamGrad> out;
  for (auto& pg : machines_[0]->params_grads())
    if (owner_.empty() || owner_.at(pg.param) == dp_->rank) out.push_back(pg);
  return out;
}

OAR_FUNC void Optimizer::build_update() {
  const GradientMachine& gm = *machines_[0];
  const Block& src = gm.program().global_block();
  auto declare = [&](Program& upd, const std::vector<ParamGrad>& pgs) {
    for (auto& [p, g] : pgs) {
      const Variable& pv = src.var(p);
      upd.global_block().create_parameter(p, pv.dtype(), pv.shape(), *pv.param());
      upd.global_block().create_var(g, {.dtype = pv.dtype(), .shape = pv.shape()});
    }
  };
  if (dp_ && dp_->shard_state) {
    // The owners the collective pass summed each gradient into.
    const auto& all = gm.params_grads();
    owner_ = optim::deal_out(src, all, dp_->collective.nranks);
    // Every rank's optimizer state, from the update program of all parameters (built, never run): the
    // accumulators are named <param>.<slot>.
    Program full, full_startup;
    declare(full, all);
    optim::append_update(full, full_startup, rule_, all);
    sharded_state_.clear();
    for (const Variable* v : full.global_block().vars()) {
      if (!v->persistable() || owner_.count(v->name())) continue;
      std::string best;
      for (auto& [p, r] : owner_)
        if (v->name().size() > p.size() + 1 && v->name().compare(0, p.size() + 1, p + ".") == 0 && p.size() > best.size()) best = p;
      if (!best.empty()) sharded_state_.push_back({v->name(), v->dtype(), v->shape(), owner_[best]});
    }
    std::sort(sharded_state_.begin(), sharded_state_.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    std::vector<optim::BroadcastVar> params;
    for (auto& pg : all) {
      const Variable& v = src.var(pg.param);
      params.push_back({pg.param, v.dtype(), v.shape(), owner_[pg.param]});
    }
    gather_run_ = update_exe_.prepare(std::make_shared<const Program>(optim::broadcast_program(params, dp_->collective)), model_->scope());
  }
  const std::vector<ParamGrad> mine = owned_params_grads();
  Program upd;
  Program startup;
  declare(upd, mine);
  lr_name_ = rule_.mixed_precision ? optim::append_scaled_update(upd, startup, rule_, mine) : optim::append_update(upd, startup, rule_, mine);
  model_->initialize(startup);
  update_ = std::make_shared<const Program>(std::move(upd));
  for (auto& m : machines_) {
    update_runs_.push_back(update_exe_.prepare(update_, m->scope()));
    update_plans_.push_back(m->plan_);
  }
}

OAR_FUNC void Optimizer::apply_update(GradientMachine& gm) {
  size_t i = 0;
  while (i < machines_.size() && machines_[i].get() != &gm) ++i;
  OAR_CHECK(i < machines_.size(), "update: the GradientMachine does not belong to this optimizer");
  if (update_plans_[i] != gm.plan_) {  // the machine was prepared again (a new gradient asked of it): a new scope
    update_runs_[i] = update_exe_.prepare(update_, gm.scope());
    update_plans_[i] = gm.plan_;
  }
  update_exe_.run(*update_runs_[i], gm.scope(), {}, {}, update_out_);
  if (gather_run_) update_exe_.run(*gather_run_, model_->scope(), {}, {}, update_out_);  // ZeRO: each parameter from its owner
  gm.updated_ = true;
  ++step_;  // every update, whichever call made it: step(), update(), train()
}

OAR_FUNC std::pair<double, std::map<std::string, double>> Optimizer::run_batches(const std::vector<io::Batch>& batches, const std::vector<std::string>& feeds) {
  std::vector<std::vector<LoDTensor>> outs(batches.size());
  auto feed_of = [&](const io::Batch& b) {
    if (b.size() < feeds.size()) throw Error(fmt::format("a batch of {} fields cannot feed {} variables", b.size(), feeds.size()));
    FeedMap f;
    for (size_t k = 0; k < feeds.size(); ++k) f[feeds[k]] = b[k];
    return f;
  };
  if (batches.size() == 1) {
    outs[0] = machines_[0]->forward_backward(feed_of(batches[0]));
  } else {
    std::vector<std::exception_ptr> errors(batches.size());
    std::vector<std::thread> threads;
    for (size_t k = 0; k < batches.size(); ++k)
      threads.emplace_back([&, k] {
        try {
          outs[k] = machines_[k]->forward_backward(feed_of(batches[k]));
        } catch (...) {
          errors[k] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    for (auto& [p, g] : machines_[0]->params_grads()) {  // sum in a fixed order: deterministic
      Value& acc_value = machines_[0]->scope().var(g);
      if (acc_value.is_selected_rows()) {  // sparse rows add up by listing them all (the update sums repeats)
        SelectedRows& acc = acc_value.selected_rows();
        std::vector<Tensor> parts{acc.value};
        int64_t n = acc.value.dim(0);
        for (size_t k = 1; k < batches.size(); ++k) {
          const SelectedRows& other = machines_[k]->scope().var(g).selected_rows();
          acc.rows.insert(acc.rows.end(), other.rows.begin(), other.rows.end());
          parts.push_back(other.value);
          n += other.value.dim(0);
        }
        Shape s = acc.value.shape();
        s[0] = n;
        Tensor all(s, acc.value.dtype(), acc.value.place());
        char* at = static_cast<char*>(all.raw());
        for (auto& t : parts) {
          detail::copy_bytes(at, all.place(), t.raw(), t.place(), t.bytes());
          at += t.bytes();
        }
        acc.value = std::move(all);
        continue;
      }
      LoDTensor& acc = acc_value.tensor();
      for (size_t k = 1; k < batches.size(); ++k) {
        const LoDTensor& other = machines_[k]->scope().tensor(g);
        visit_dtype(acc.dtype(), [&](auto tag) {
          using T = typename decltype(tag)::type;
          if constexpr (std::is_floating_point_v<T>) {
            T* a = acc.data<T>();
            const T* b = other.data<T>();
            for (int64_t j = 0; j < acc.numel(); ++j) a[j] += b[j];
          }
        });
      }
    }
  }
  apply_update(*machines_[0]);
  double loss = 0;
  std::map<std::string, double> metrics;
  const auto& names = machines_[0]->fetch_names();
  for (auto& o : outs) {
    loss += o[0].get(0) / double(outs.size());
    for (size_t j = 1; j < o.size(); ++j)
      if (o[j].numel() == 1) metrics[names[j]] += o[j].get(0) / double(outs.size());
  }
  return {loss, metrics};
}

}  // namespace oar
