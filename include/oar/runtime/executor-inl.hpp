// oar/runtime/executor-inl.hpp: the implementation of executor.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/runtime/executor.hpp"

#include "oar/device/cuda.hpp"
#include "oar/ir/nearest_names.hpp"
#include "oar/runtime/profiler.hpp"

namespace oar {

OAR_FUNC Executor::Executor(Place place, uint64_t seed) : place_(place), dev_(make_device_context(place, seed)) {}

OAR_FUNC std::vector<LoDTensor> Executor::run(PreparedBlock& p, Scope& scope, const FeedMap& feeds, const std::vector<std::string>& fetch) {
  std::vector<LoDTensor> out;
  run(p, scope, feeds, fetch, out);
  return out;
}

OAR_FUNC void Executor::run(PreparedBlock& p, Scope& scope, const FeedMap& feeds, const std::vector<std::string>& fetch, std::vector<LoDTensor>& out) {
  if (detail::profiling()) [[unlikely]] return run_profiled(p, scope, feeds, fetch, out, nullptr);
  run_impl(p, scope, feeds, fetch, out, nullptr, nullptr, nullptr);
}

OAR_FUNC void Executor::run(PreparedBlock& p, Scope& scope, const FeedMap& feeds, const std::vector<std::string>& fetch, std::vector<LoDTensor>& out,
                            Fence& arrived) {
  arrived = Fence();
  if (detail::profiling()) [[unlikely]] return run_profiled(p, scope, feeds, fetch, out, &arrived);
  run_impl(p, scope, feeds, fetch, out, &arrived, nullptr, nullptr);
}

OAR_FUNC PendingFetch Executor::run_async(PreparedBlock& p, Scope& scope, const FeedMap& feeds, const std::vector<std::string>& fetch) {
  std::vector<LoDTensor> out;
  Fence arrived;
  run(p, scope, feeds, fetch, out, arrived);
  return PendingFetch(std::move(out), std::move(arrived));
}

OAR_FUNC void Executor::run_profiled(PreparedBlock& p, Scope& scope, const FeedMap& feeds, const std::vector<std::string>& fetch, std::vector<LoDTensor>& out,
                                     Fence* arrived) {
  // The run's own time apart from its kernels', in three lines.
  using clock = std::chrono::steady_clock;
  auto ns = [](clock::time_point a, clock::time_point b) { return int64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count()); };
  const int64_t kernels0 = detail::kernel_ns;
  const auto t0 = clock::now();
  clock::time_point t1, t2;
  run_impl(p, scope, feeds, fetch, out, arrived, &t1, &t2);
  const auto t3 = clock::now();
  detail::record_section("(feed)", ns(t0, t1));
  detail::record_section("(fetch)", ns(t2, t3));
  detail::record_section("(executor)", ns(t1, t2) - (detail::kernel_ns - kernels0));
}

OAR_FUNC void Executor::run_impl(PreparedBlock& p, Scope& scope, const FeedMap& feeds, const std::vector<std::string>& fetch, std::vector<LoDTensor>& out,
                                 Fence* arrived, std::chrono::steady_clock::time_point* fed, std::chrono::steady_clock::time_point* ran) {
  for (auto& t : out) t = LoDTensor();  // last run's fetches let go of their storage, so this run reuses it
  if (p.scope_ != &scope) bind(p, scope);
  const Block& b = p.program_->block(p.block_);
  // On a GPU this run follows the device's last run (another executor's, an Optimizer's update say) on the
  // device, and the next run follows this one, whichever way this one ends.
  if (place_.is_cuda()) in_flight_.admit();  // before this run holds the device's order, which other threads' captures wait for
  bool queued = false;                       // copies to or from page-locked memory queued by this run
  struct EndRun {
    DeviceContext& dev;
    int token;
    ~EndRun() { dev.end_run(token); }
  } end_run{*dev_, dev_->begin_run()};
  // A CUDA graph reads its feeds from the buffers it was captured with: feeds are copied into them, never shared.
  const bool graph = place_.is_cuda() && !p.graph_.off && cuda_graphs();
  for (auto& [name, t] : feeds) {
    Variable* v = b.find_var(name);
    if (!v) throw Error(fmt::format("feed '{}': no such variable in the program", name));
    check_feed(*v, t);
    Value* val = p.local_->find(name);
    if (t.place() == place_ && !graph) {
      val->tensor() = t;  // shares storage: no copy
      p.shared_feeds_.insert(val);
    } else {  // into the variable's own storage on this place, reused from run to run
      LoDTensor& dst = val->tensor();
      if (p.shared_feeds_.erase(val)) dst = LoDTensor();  // it held the caller's tensor of an earlier run: not written into
      dst.resize(t.shape(), t.dtype(), place_);  // here, not on the feed's place (what copy_from picks for an empty tensor)
      queued = dev_->put_feed(dst, t, arrived != nullptr) || queued;
      dst.set_lod(t.lod());
    }
  }
  if (fed) *fed = std::chrono::steady_clock::now();
  for (auto& name : p.required_feeds_)
    if (!feeds.count(name)) {
      const Variable& v = b.var_recursive(name);
      throw Error(fmt::format("missing feed '{}' ({} {}): the program reads it but nothing computes it", name, oar::name(v.dtype()), v.shape().str()), v.origin());
    }
  for (auto& name : fetch)
    if (!b.find_var(name) && !p.local_->find(name))
      throw Error(fmt::format("cannot fetch '{}': no such variable in the program{}", name, detail::nearest_names(b, name)));
  bool capture = false;
  if (graph) {
    std::vector<std::pair<Shape, const void*>>& now = p.graph_.now;  // kept: a replayed run allocates nothing
    now.clear();
    for (const Value* v : p.graph_.values) {
      if (!v->is_tensor()) {  // a sparse gradient, say: not a tensor with one buffer
        p.graph_.off = true;
        break;
      }
      const LoDTensor& t = v->tensor();
      now.emplace_back(t.shape(), t.raw());
      if (!t.lod().empty()) p.graph_.off = true;  // sequences: kernels read their LoD on the host
    }
    if (p.graph_.exec && now == p.graph_.key && !p.graph_.off) {  // replay: the host queues one launch
      dev_->launch(p.graph_.exec.get());
      if (ran) *ran = std::chrono::steady_clock::now();
      fetch_outputs(p, fetch, out, arrived, queued);
      return;
    }
    p.graph_.exec.reset();  // the feeds changed: the captured buffers may have too
    p.graph_.same = now == p.graph_.last ? p.graph_.same + 1 : 0;
    std::swap(p.graph_.last, now);
    capture = p.graph_.same >= 2 && !p.graph_.off;
  }
  // The block's own tensor arrays start each run empty, as in the fresh local scope of a Fluid run: writes
  // append and grow them, so last run's entries would otherwise stay behind.
  for (Value* a : p.arrays_) a->list().clear();
  std::vector<const Value*>& fetched = p.fetched_;  // with recycling: what must survive the run
  fetched.clear();
  int64_t batch = 1;  // with recycling: the first-run size guess for unknown dims
  if (p.recycle_) {
    p.reclaim();
    for (auto& name : fetch)
      if (const Value* v = p.local_->find(name)) fetched.push_back(v);
    if (!feeds.empty() && feeds.begin()->second.rank() > 0) batch = feeds.begin()->second.dim(0);
  }
  if (capture) run_captured(p, fetched, batch);
  else run_steps(p, fetched, batch);
  if (ran) *ran = std::chrono::steady_clock::now();
  fetch_outputs(p, fetch, out, arrived, queued);
}

OAR_FUNC void Executor::run_captured(PreparedBlock& p, const std::vector<const Value*>& fetched, int64_t batch) {
  DeviceContext& dev = *dev_;
  if (!dev.begin_capture()) {  // another run is under way on the device: this one runs op by op, the next tries again
    run_steps(p, fetched, batch);
    return;
  }
  bool replayable = false;
  try {
    run_steps(p, fetched, batch);
  } catch (...) {  // a call that cannot be captured, or a real error: the eager run below tells them apart
    const std::vector<void*> lost = dev.abandon_capture();
    p.graph_.off = true;
    if (!lost.empty()) p.drop_storage(lost);
    if (p.recycle_) p.reclaim();
    run_steps(p, fetched, batch);
    return;
  }
  std::vector<void*> lost;
  void* g = dev.end_capture(&replayable, &lost);
  if (!g) {  // the capture failed at its end: nothing ran
    p.graph_.off = true;
    if (!lost.empty()) p.drop_storage(lost);
    if (p.recycle_) p.reclaim();
    run_steps(p, fetched, batch);
    return;
  }
  dev.launch(g);  // a capture runs nothing: this launch is this run's work
  if (replayable) {
    p.graph_.exec = dev.keep_graph(g);
    p.graph_.key = p.graph_.last;
  } else {  // the captured work kept (or freed) device memory of its own: once only
    dev.synchronize();
    dev.keep_graph(g);  // destroyed at once
    p.graph_.off = true;
  }
}

OAR_FUNC void Executor::fetch_outputs(PreparedBlock& p, const std::vector<std::string>& fetch, std::vector<LoDTensor>& out, Fence* arrived, bool queued) {
  out.resize(fetch.size());
  for (size_t i = 0; i < fetch.size(); ++i) {
    const Value* v = p.local_->find(fetch[i]);
    if (!v || !v->is_tensor() || !v->tensor().initialized()) {
      if (arrived) dev_->synchronize();  // no copy into `out` still under way when the caller sees the error
      const Variable* var = p.program_->block(p.block_).find_var(fetch[i]);
      throw Error(fmt::format("cannot fetch '{}': it has no value after the run", fetch[i]), var ? var->origin() : Origin());
    }
    queued = dev_->take_fetch(v->tensor(), out[i], arrived != nullptr) || queued;
  }
  // After everything the run queued, its feed copies included (a pinned feed is read by the device later): once
  // the fence is done the run has finished on the device and its feeds may be written.
  if (arrived) {
    *arrived = dev_->record_fence();
    if (queued) in_flight_.hold(*arrived);
  }
}

OAR_FUNC void Executor::run_steps(PreparedBlock& p, const std::vector<const Value*>& fetched, int64_t batch) {
  const bool drop_views = !p.recycle_ && place_.is_cpu();
  if (drop_views)
    for (auto& s : p.steps_)
      for (Value* v : s.views)
        if (LoDTensor* t = v->tensor_if()) t->release_storage();
  for (size_t i = 0; i < p.steps_.size(); ++i) {
    auto& s = p.steps_[i];
    if (!s.fn || s.grouped) {
      if (s.run_by != RunBy::kernel && s.run_by != RunBy::feed && s.run_by != RunBy::fetch) run_control(p, s, int(i));
      continue;
    }
    try {
      if (p.recycle_) p.acquire(s, batch);
      if (s.group_fn) detail::timed_op(*s.op, [&] { s.group_fn(s.group); });
      else detail::timed_op(*s.op, [&] { s.fn(s.ctx); });
      if (p.recycle_) {
        p.settle(s);
        p.release(s, fetched);
      } else if (drop_views && !s.views_known) {
        p.find_views(i);
      }
    } catch (Error& e) {
      e.add_context(fmt::format("while running op #{} '{}' of block {}", i, s.op->type(), p.block_), s.op->origin());
      throw;
    } catch (const std::exception& e) {
      throw Error(fmt::format("{}: {} (op #{} of block {})", s.op->type(), e.what(), i, p.block_), s.op->origin());
    }
  }
}

OAR_FUNC void Executor::run(const Program& program, Scope& scope, int block) {
  auto p = prepare(program, scope, block);
  run(*p, scope);
  scope.drop(p->local_);
}

OAR_FUNC std::vector<LoDTensor> Executor::run(const Program& program, Scope& scope, const FeedMap& feeds, const std::vector<std::string>& fetch) {
  auto key = std::make_tuple(&program, &scope, fingerprint(program));
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, prepare(program, scope)).first;
  return run(*it->second, scope, feeds, fetch);
}

OAR_FUNC void Executor::check_feed(const Variable& v, const LoDTensor& t) {
  bool ok = t.initialized() && t.dtype() == v.dtype() && t.rank() == v.shape().rank();
  for (int i = 0; ok && i < t.rank(); ++i) ok = dims_compatible(v.shape()[i], t.dim(i));
  if (!ok)
    throw Error(fmt::format("feed '{}': expected {} {}, got {}", v.name(), oar::name(v.dtype()), v.shape().str(),
                            t.initialized() ? fmt::format("{} {}", oar::name(t.dtype()), t.shape().str()) : std::string("an empty tensor")),
                v.origin());
  if (t.lod_level() != v.lod_level())
    throw Error(v.lod_level() == 0 ? fmt::format("feed '{}': the tensor has {} LoD level(s) but the variable has none (declare it with .lod_level({}))",
                                                 v.name(), t.lod_level(), t.lod_level())
                                   : fmt::format("feed '{}': the variable has lod_level {}, the tensor {} LoD level(s){}", v.name(), v.lod_level(),
                                                 t.lod_level(), t.lod_level() == 0 ? " (feed a LoDTensor with its sequence offsets or lengths)" : ""),
                v.origin());
  if (!t.lod().empty()) {
    std::string why = lod_error(t.lod(), t.dim(0));
    if (!why.empty()) throw Error(fmt::format("feed '{}': invalid LoD: {}", v.name(), why), v.origin());
  }
}

}  // namespace oar

// The rest of the implementation, by concern.
#include "oar/runtime/prepare-inl.hpp"
#include "oar/runtime/plan-inl.hpp"
#include "oar/runtime/control_flow-inl.hpp"
#include "oar/runtime/recurrent-inl.hpp"
