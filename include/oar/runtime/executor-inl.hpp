// oar/runtime/executor-inl.hpp: the implementation of executor.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/runtime/executor.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "oar/device/cuda.hpp"
#include "oar/ops/control_flow.hpp"
#include "oar/ops/dropout.hpp"
#include "oar/ops/feed_fetch.hpp"
#include "oar/ops/collective.hpp"
#include "oar/ops/random.hpp"
#include "oar/ops/recurrent.hpp"
#include "oar/ops/registry.hpp"
#include "oar/runtime/profiler.hpp"

namespace oar {

OAR_FUNC void PreparedBlock::recycle_buffers(std::set<std::string> keep) {
  recycle_ = true;
  keep_ = std::move(keep);
  plan();
}

OAR_FUNC size_t PreparedBlock::free_bytes() const {
  size_t n = 0;
  for (auto& b : free_) n += b->bytes();
  return n;
}

OAR_FUNC void PreparedBlock::plan() {
  plan_buffers();
  if (grouping_) group(cuda());  // group() asks only whether the place is a GPU
}

OAR_FUNC void PreparedBlock::plan_buffers() {
  for (auto& s : steps_) s.acquire.clear(), s.release.clear();
  slots_.clear();
  if (!recycle_) return;
  const Block& b = program_->block(block_);
  std::map<std::string, int> first_write, first_read, last_use;
  std::set<std::string> excluded(keep_.begin(), keep_.end());
  excluded.insert(required_feeds_.begin(), required_feeds_.end());
  for (int i = 0; i < int(steps_.size()); ++i) {
    const Operator& op = *steps_[size_t(i)].op;
    const bool control = op.sub_block() >= 0 || !steps_[size_t(i)].fn;
    for (auto& n : op.input_names()) {
      first_read.emplace(n, i);
      last_use[n] = i;
      if (control) excluded.insert(n);
    }
    for (auto& n : op.output_names()) {
      first_write.emplace(n, i);
      last_use[n] = i;
      if (control) excluded.insert(n);
    }
  }
  for (auto& [n, w] : first_write) {
    if (excluded.count(n)) continue;
    const Variable* v = b.find_var(n);
    if (!v || v->persistable() || v->kind() != VarKind::lod_tensor) continue;
    Value* val = local_->find_local(n);
    if (!val) continue;  // lives in an outer scope
    if (auto r = first_read.find(n); r != first_read.end() && r->second <= w) continue;  // read before written
    const int slot = int(slots_.size());
    slots_.push_back({val, v});
    steps_[size_t(w)].acquire.push_back(slot);
    steps_[size_t(last_use[n])].release.push_back(slot);
  }
}

OAR_FUNC size_t PreparedBlock::expected_bytes(const Temp& sl, int64_t batch) const {
  if (sl.bytes) return sl.bytes;
  int64_t n = 1;
  for (int64_t d : sl.var->shape()) n *= d < 0 ? batch : d;
  return n > 0 ? size_t(n) * size_of(sl.var->dtype()) : 0;
}

OAR_FUNC void PreparedBlock::acquire(const Step& s, int64_t batch) {
  for (int k : s.acquire) {
    Temp& sl = slots_[size_t(k)];
    LoDTensor& t = sl.value->tensor();
    const size_t need = expected_bytes(sl, batch);
    sl.lent = nullptr;
    if (t.initialized() || need == 0 || sl.view) continue;
    size_t best = free_.size();
    for (size_t j = 0; j < free_.size(); ++j)
      if (free_[j]->bytes() >= need && (best == free_.size() || free_[j]->bytes() < free_[best]->bytes())) best = j;
    if (best == free_.size()) continue;
    t.adopt_storage(std::move(free_[best]));
    sl.lent = t.storage().get();
    free_[best] = std::move(free_.back());
    free_.pop_back();
  }
}

OAR_FUNC void PreparedBlock::settle(const Step& s) {
  for (int k : s.acquire) {
    Temp& sl = slots_[size_t(k)];
    if (!sl.lent) continue;
    const LoDTensor* t = sl.value->tensor_if();
    if (t && t->storage() && t->storage().get() != sl.lent && t->storage().use_count() > 1) sl.view = true;
    sl.lent = nullptr;
  }
}

OAR_FUNC void PreparedBlock::drop_storage(const std::vector<void*>& blocks) {
  const auto lost = [&](const std::shared_ptr<Storage>& st) { return st && std::find(blocks.begin(), blocks.end(), st->data()) != blocks.end(); };
  for (const Value* v : graph_.values)
    if (const LoDTensor* t = v->tensor_if(); t && lost(t->storage())) const_cast<Value*>(v)->tensor() = LoDTensor();
  std::erase_if(free_, lost);
}

OAR_FUNC void PreparedBlock::reclaim() {
  for (Temp& sl : slots_) give_back(sl);
}

OAR_FUNC void PreparedBlock::release(const Step& s, const std::vector<const Value*>& fetched) {
  for (int k : s.release) {
    Temp& sl = slots_[size_t(k)];
    if (std::find(fetched.begin(), fetched.end(), sl.value) == fetched.end()) give_back(sl);
  }
}

OAR_FUNC void PreparedBlock::give_back(Temp& sl) {
  LoDTensor& t = sl.value->tensor();
  // An empty tensor keeps its 0-byte storage: no other temporary could use it, and giving it up would make the
  // next run allocate it again (and the free list grow by one every run).
  if (!t.initialized() || t.storage()->bytes() == 0) return;
  std::shared_ptr<Storage> st = t.release_storage();
  sl.bytes = st->bytes();
  if (st.use_count() == 1) free_.push_back(std::move(st));
}

OAR_FUNC Executor::Executor(Place place, uint64_t seed) : place_(place), dev_(make_device_context(place, seed)) {}

OAR_FUNC std::shared_ptr<PreparedBlock> Executor::prepare(const Program& program, Scope& scope, int block, PrepareOptions options) {
  return prepare(std::make_shared<const Program>(program), scope, block, options);
}

OAR_FUNC std::shared_ptr<PreparedBlock> Executor::prepare(std::shared_ptr<const Program> program, Scope& scope, int block, PrepareOptions options) {
  auto p = std::make_shared<PreparedBlock>();
  p->program_ = std::move(program);
  p->block_ = block;
  p->options_ = options;
  bind(*p, scope);
  return p;
}

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

namespace detail {
/// " (nearest: 'a', 'b')": up to three names of `b` and its ancestors closest to `name` in edit distance, for
/// the error of a name that is not there; empty when none is near. Only an error pays for it.
inline std::string nearest_names(const Block& b, std::string_view name) {
  auto distance = [](std::string_view x, std::string_view y) {
    std::vector<size_t> row(y.size() + 1);
    for (size_t j = 0; j <= y.size(); ++j) row[j] = j;
    for (size_t i = 1; i <= x.size(); ++i) {
      size_t diag = row[0];
      row[0] = i;
      for (size_t j = 1; j <= y.size(); ++j) {
        size_t up = row[j];
        row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (x[i - 1] != y[j - 1])});
        diag = up;
      }
    }
    return row[y.size()];
  };
  const size_t limit = std::max<size_t>(2, name.size() / 2);
  std::vector<std::pair<size_t, std::string>> near;
  for (const Block* k = &b; k; k = k->parent())
    for (const Variable* v : k->vars())
      if (size_t d = distance(name, v->name()); d <= limit) near.emplace_back(d, v->name());
  std::sort(near.begin(), near.end());
  near.erase(std::unique(near.begin(), near.end()), near.end());
  if (near.empty()) return {};
  std::string out = " (nearest:";
  for (size_t i = 0; i < near.size() && i < 3; ++i) out += fmt::format("{} '{}'", i ? "," : "", near[i].second);
  return out + ")";
}
}  // namespace detail

OAR_FUNC void Executor::run_impl(PreparedBlock& p, Scope& scope, const FeedMap& feeds, const std::vector<std::string>& fetch, std::vector<LoDTensor>& out,
                                 Fence* arrived, std::chrono::steady_clock::time_point* fed, std::chrono::steady_clock::time_point* ran) {
  for (auto& t : out) t = LoDTensor();  // last run's fetches let go of their storage, so this run reuses it
  if (p.scope_ != &scope) bind(p, scope);
  const Block& b = p.program_->block(p.block_);
  // On a GPU this run follows the device's last run (another executor's, an Optimizer's update say) on the
  // device, and the next run follows this one, whichever way this one ends.
  CudaContext* cu = place_.is_cuda() ? static_cast<CudaContext*>(dev_.get()) : nullptr;
  if (cu) in_flight_.admit();  // before this run holds the device's order, which other threads' captures wait for
  bool queued = false;         // copies to or from page-locked memory queued by this run
  struct EndOrder {
    CudaContext* cu;
    int previous_device;
    ~EndOrder() {
      if (cu) cu->end_device_order(previous_device);
    }
  } end_order{cu, cu ? cu->follow_device_order() : 0};
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
      // From pinned memory the copy is queued on this run's stream and the host goes on; the pinned allocator
      // keeps the block until it has run. For a run the host does not wait for, other host memory is first
      // copied into a page-locked block (what the driver's own copy from pageable memory does, except that its
      // copy waits for every stream of the device, the runs queued before this one included): then the caller
      // may write `t` as soon as run() returns. A run the host waits for gains nothing by that and keeps the
      // driver's copy, the path every GPU session has run. Past kMaxQueuedHostCopy bytes, from other devices,
      // and when no more memory can be pinned, the copy is made before the run starts.
      Tensor staged;
      if (cu && arrived && !t.pinned() && t.place().is_cpu() && t.bytes() > 0 && t.bytes() <= detail::kMaxQueuedHostCopy) {
        staged = detail::try_page_locked(t.shape(), t.dtype());
        if (staged.initialized()) std::memcpy(staged.raw(), t.raw(), t.bytes());
      }
      if (cu && t.pinned()) {
        detail::cuda_copy_from_pinned(*cu, dst.raw(), t.raw(), t.bytes(), t.storage()->data());
        queued = true;
      } else if (staged.initialized()) {
        detail::cuda_copy_from_pinned(*cu, dst.raw(), staged.raw(), t.bytes(), staged.storage()->data());
        queued = true;
      } else {
        dst.copy_from(t);
      }
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
      static_cast<CudaContext&>(*dev_).launch(p.graph_.exec.get());
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
  auto& cu = static_cast<CudaContext&>(*dev_);
  if (!cu.begin_capture()) {  // another run is under way on the device: this one runs op by op, the next tries again
    run_steps(p, fetched, batch);
    return;
  }
  bool replayable = false;
  try {
    run_steps(p, fetched, batch);
  } catch (...) {  // a call that cannot be captured, or a real error: the eager run below tells them apart
    const std::vector<void*> lost = cu.abandon_capture();
    p.graph_.off = true;
    if (!lost.empty()) p.drop_storage(lost);
    if (p.recycle_) p.reclaim();
    run_steps(p, fetched, batch);
    return;
  }
  std::vector<void*> lost;
  void* g = cu.end_capture(&replayable, &lost);
  if (!g) {  // the capture failed at its end: nothing ran
    p.graph_.off = true;
    if (!lost.empty()) p.drop_storage(lost);
    if (p.recycle_) p.reclaim();
    run_steps(p, fetched, batch);
    return;
  }
  cu.launch(g);  // a capture runs nothing: this launch is this run's work
  if (replayable) {
    p.graph_.exec = std::shared_ptr<void>(g, [](void* x) { CudaContext::destroy_graph(x); });
    p.graph_.key = p.graph_.last;
  } else {  // the captured work kept (or freed) device memory of its own: once only
    cu.synchronize();
    CudaContext::destroy_graph(g);
    p.graph_.off = true;
  }
}

OAR_FUNC void Executor::fetch_outputs(PreparedBlock& p, const std::vector<std::string>& fetch, std::vector<LoDTensor>& out, Fence* arrived, bool queued) {
  out.resize(fetch.size());
  CudaContext* cu = arrived && place_.is_cuda() ? static_cast<CudaContext*>(dev_.get()) : nullptr;  // a GPU run with a fence: copies queued
  for (size_t i = 0; i < fetch.size(); ++i) {
    const Value* v = p.local_->find(fetch[i]);
    if (!v || !v->is_tensor() || !v->tensor().initialized()) {
      if (cu) cu->synchronize();  // no copy into `out` still under way when the caller sees the error
      const Variable* var = p.program_->block(p.block_).find_var(fetch[i]);
      throw Error(fmt::format("cannot fetch '{}': it has no value after the run", fetch[i]), var ? var->origin() : Origin());
    }
    const LoDTensor& t = v->tensor();
    Tensor host;
    if (cu && t.place() == place_ && t.bytes() <= detail::kMaxQueuedHostCopy) host = detail::try_page_locked(t.shape(), t.dtype());
    if (host.initialized()) {
      // Queued on the run's stream: the next run on the device, which may reuse the variable's buffer, follows it.
      detail::cuda_download_to_pinned(*cu, host.raw(), t.raw(), t.bytes(), host.storage()->data());
      out[i] = LoDTensor(std::move(host), t.lod());
      queued = true;
    } else if (t.place().is_cpu()) {
      // A value the host computed: the next run, queued before this one's values are read, may write it at once.
      out[i] = cu ? LoDTensor(t.clone(), t.lod()) : t;
    } else {
      out[i] = LoDTensor(t.to(cpu()), t.lod());  // fetches come back to the host
    }
  }
  // After everything the run queued, its feed copies included (a pinned feed is read by the device later): once
  // the fence is done the run has finished on the device and its feeds may be written.
  if (cu) {
    *arrived = cu->record_fence();
    if (queued) in_flight_.hold(*arrived);
  }
}

/// The outputs of step `i` that share an input's storage without being that input (views), in its `views`:
/// only this run's own temporaries (in the local scope) that no step up to `i` reads, so that letting them go
/// when a run starts loses nothing a step reads before it is made again (a loop body's carried value).
OAR_FUNC void PreparedBlock::find_views(size_t i) {
  Step& s = steps_[i];
  s.views_known = true;
  std::vector<const Value*> ins;
  std::vector<const Storage*> in_storage;
  for (const std::string& n : s.op->input_names())
    if (const Value* v = s.ctx.scope().find(n)) {
      ins.push_back(v);
      if (const LoDTensor* t = v->tensor_if(); t && t->storage()) in_storage.push_back(t->storage().get());
    }
  for (const std::string& n : s.op->output_names()) {
    Value* v = local_->find_local(n);
    const LoDTensor* t = v ? v->tensor_if() : nullptr;
    if (!t || !t->storage() || std::find(ins.begin(), ins.end(), v) != ins.end()) continue;
    if (std::find(in_storage.begin(), in_storage.end(), t->storage().get()) == in_storage.end()) continue;
    bool read_before = false;
    for (size_t j = 0; j <= i && !read_before; ++j) {
      const auto names = steps_[j].op->input_names();
      read_before = std::find(names.begin(), names.end(), n) != names.end();
    }
    if (!read_before) s.views.push_back(v);
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
      if (s.op->sub_block() >= 0) run_control(p, s, int(i));
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

OAR_FUNC void Executor::run_control(PreparedBlock& p, PreparedBlock::Step& s, int index) {
  const std::string& type = s.op->type();
  if (type == ops::Recurrent::type || type == ops::RecurrentGrad::type || type == ops::While::type || type == ops::WhileGrad::type) {
    try {
      if (type == ops::Recurrent::type) run_recurrent(p, s);
      else if (type == ops::RecurrentGrad::type) run_recurrent_grad(p, s);
      else if (type == ops::While::type) run_while(p, s);
      else run_while_grad(p, s);
    } catch (Error& e) {
      e.add_context(fmt::format("while running op #{} '{}' of block {}", index, s.op->type(), p.block_), s.op->origin());
      throw;
    }
    return;
  }
  using Op = ops::ConditionalBlock;
  using G = ops::ConditionalBlockGrad;
  const KernelContext& c = s.ctx;
  const bool grad = s.op->type() == G::type;
  bool go = true;
  if (s.op->attr(Op::is_scalar_condition)) {
    const LoDTensor& cond = c.in(Op::cond);
    c.check(cond.dtype() == DType::boolean && cond.numel() == 1, "Cond must be one bool, got {} {}", oar::name(cond.dtype()), cond.shape());
    if (cond.place().is_cpu()) go = cond.data<bool>()[0];
    else go = cond.to(cpu()).data<bool>()[0];  // a device's condition: the host waits for it (the branch is chosen here)
  } else {
    for (size_t k = 0; k < c.num_in(Op::cond); ++k) go = go && c.in(Op::cond, k).numel() > 0;
  }
  try {
    if (grad) return run_conditional_grad(p, s, go);
    if (!go) return;
    if (!s.sub) s.sub = prepare(p.program_, *p.local_, s.op->sub_block(), p.options_);
    // The scope the sub-block ran in, for conditional_block_grad (one pointer: no allocation after the first run).
    if (c.has_out(Op::scope)) {
      Value::ScopeList& scopes = c.out_value(Op::scope)->scopes();
      scopes.resize(1);
      scopes[0] = s.sub->local_;
    }
    run(*s.sub, *p.local_);
  } catch (Error& e) {
    e.add_context(fmt::format("while running op #{} '{}' of block {}", index, s.op->type(), p.block_), s.op->origin());
    throw;
  }
}

namespace detail {

/// The batch layout of a recurrent op's sequences (the last LoD level of `x`): each sequence's first row, the
/// sequences ordered longest first (ties in LoD order, as a stable sort gives), k_t, the number of them longer
/// than t, for every step t, and `step_rows`: the rows of step t's k_t sequences in x, step after step, then
/// `order` again (the row lists the step copies read). No allocation once the vectors have grown to the batch.
inline void recurrent_layout(const KernelContext& c, const LoDTensor& x, std::vector<int64_t>& start, std::vector<int64_t>& order, std::vector<int64_t>& active,
                             std::vector<int64_t>& step_rows) {
  c.check(x.lod_level() >= 1, "input '{}' has no LoD: a recurrent op steps over sequences", c.in_name(ops::Recurrent::inputs));
  const auto& off = x.lod().back();
  const size_t n = off.size() - 1;
  start.resize(n);
  order.resize(n);
  for (size_t i = 0; i < n; ++i) start[i] = int64_t(off[i]), order[i] = int64_t(i);
  auto len = [&](int64_t s) { return int64_t(off[size_t(s) + 1] - off[size_t(s)]); };
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return len(a) != len(b) ? len(a) > len(b) : a < b; });
  const int64_t steps = n ? len(order[0]) : 0;
  active.resize(size_t(steps));
  int64_t k = int64_t(n);
  for (int64_t t = 0; t < steps; ++t) {
    while (k > 0 && len(order[size_t(k - 1)]) <= t) --k;
    active[size_t(t)] = k;
  }
  step_rows.clear();
  for (int64_t t = 0; t < steps; ++t)
    for (int64_t r = 0; r < active[size_t(t)]; ++r) step_rows.push_back(start[size_t(order[size_t(r)])] + t);
  step_rows.insert(step_rows.end(), order.begin(), order.end());
}

/// The row lists where the kernel's place reads them: `rows` itself on the CPU; on a GPU a copy in the device's
/// memory (`device` keeps it), uploaded once per run so that each step's row moves are one kernel.
inline const int64_t* rows_on_place(const KernelContext& c, const std::vector<int64_t>& rows, Tensor& device) {
  if (!c.place().is_cuda()) return rows.data();
  if (rows.empty()) return nullptr;
  device = Tensor(Shape{int64_t(rows.size())}, DType::i64, c.place());
  oar::detail::cuda_upload(c.cuda(), device.raw(), rows.data(), device.bytes());  // queued: the host goes on
  return device.data<int64_t>();
}

/// `t` shaped like `like` with `rows` rows, same dtype, on the kernel's place (a scope's fresh value is on the
/// CPU until something puts it elsewhere).
inline void resize_rows(const KernelContext& c, LoDTensor& t, const Shape& like, DType dtype, int64_t rows) {
  Shape s = like;
  s[0] = rows;
  t.resize(s, dtype, c.place());
}

/// Zeros `t`, which lives on the kernel's place (on a GPU: queued on its stream).
inline void zero(const KernelContext& c, Tensor& t) {
  if (!t.bytes()) return;
  if (c.place().is_cuda()) oar::detail::cuda_zero(c.cuda(), t.raw(), t.bytes());
  else std::memset(t.raw(), 0, t.bytes());
}

/// `bytes` from src to dst, both in the memory of the kernel's place (on a GPU: queued on its stream).
inline void copy_bytes(const KernelContext& c, void* dst, const void* src, size_t bytes) {
  if (!bytes) return;
  if (c.place().is_cuda()) oar::detail::cuda_copy_rows(c.cuda(), dst, bytes, src, bytes, bytes, 1);
  else std::memcpy(dst, src, bytes);
}

/// n rows of `rb` bytes: row dst_rows[r] of dst = row src_rows[r] of src (row r where a list is null). The
/// lists live where the kernel runs: on the host for the CPU, in the device's memory for a GPU (one kernel).
inline void move_rows(const KernelContext& c, void* dst, const void* src, size_t rb, int64_t n, const int64_t* dst_rows, const int64_t* src_rows) {
  if (!rb || n <= 0) return;
  if (c.place().is_cuda()) return oar::detail::cuda_move_rows(c.cuda(), dst, src, rb, n, dst_rows, src_rows);
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  for (int64_t r = 0; r < n; ++r) std::memcpy(d + size_t(dst_rows ? dst_rows[r] : r) * rb, s + size_t(src_rows ? src_rows[r] : r) * rb, rb);
}

/// Variable `name` of a step scope (a recurrent op's attributes name them) as a tensor; an oar::Error naming it
/// when the step block has none (a program read from a damaged file).
inline LoDTensor& step_tensor(const KernelContext& c, Scope& step, const std::string& name) {
  Value* v = step.find_local(name);
  c.check(v != nullptr, "the step block has no variable '{}'", name);
  return v->tensor();
}

/// The first n elements of dst += those of src (f32 / f64: the gradients a recurrent op moves between steps),
/// starting `dst_at` and `src_at` elements in.
inline void add_elements(const KernelContext& c, Tensor& dst, const Tensor& src, int64_t n, int64_t dst_at = 0, int64_t src_at = 0) {
  c.check(dst.dtype() == src.dtype() && src.numel() >= src_at + n && dst.numel() >= dst_at + n, "adding a {} {} gradient to a {} {} one",
          oar::name(src.dtype()), src.shape(), oar::name(dst.dtype()), dst.shape());
  c.dispatch(type_list<float, double>{}, dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* d = static_cast<T*>(dst.raw()) + dst_at;
    const T* s = static_cast<const T*>(src.raw()) + src_at;
    if (c.place().is_cuda()) return oar::detail::cuda_accumulate(c.cuda(), dst.dtype(), d, s, n);
    for (int64_t i = 0; i < n; ++i) d[i] += s[i];
  });
}

}  // namespace detail

OAR_FUNC std::shared_ptr<PreparedBlock::Loop> Executor::make_loop(const KernelContext& c) const {
  using R = ops::Recurrent;
  const Operator& op = c.op();
  auto L = std::make_shared<PreparedBlock::Loop>();
  L->block = op.sub_block();
  L->step_inputs = op.attr(R::step_inputs), L->step_outputs = op.attr(R::step_outputs);
  L->ex_states = op.attr(R::ex_states), L->states = op.attr(R::states), L->boot_states = op.attr(R::boot_states);
  return L;
}

OAR_FUNC void Executor::run_recurrent(PreparedBlock& p, PreparedBlock::Step& s) {
  using R = ops::Recurrent;
  const KernelContext& c = s.ctx;
  if (!s.loop) s.loop = make_loop(c);
  PreparedBlock::Loop& L = *s.loop;
  const LoDTensor& x0 = c.in(R::inputs, 0);
  detail::recurrent_layout(c, x0, L.start, L.order, L.active, L.step_rows);
  const int64_t* rows = detail::rows_on_place(c, L.step_rows, L.step_rows_device);
  for (size_t i = 1; i < c.num_in(R::inputs); ++i) {
    const LoDTensor& xi = c.in(R::inputs, i);
    c.check(xi.lod_level() >= 1 && xi.lod().back() == x0.lod().back(), "input '{}' must have the LoD of '{}'", c.in_name(R::inputs, i), c.in_name(R::inputs, 0));
  }
  const int64_t steps = int64_t(L.active.size());
  while (int64_t(L.steps.size()) < steps)
    L.steps.push_back(L.steps.empty() ? prepare(p.program_, *p.local_, L.block, p.options_) : prepare_like(*L.steps[0], *p.local_));
  Value::ScopeList& scopes = c.out_value(R::step_scopes)->scopes();
  scopes.resize(size_t(steps));
  for (int64_t t = 0; t < steps; ++t) scopes[size_t(t)] = L.steps[size_t(t)]->local_;

  const Block& sb = p.program_->block(L.block);
  const int64_t* order_rows = rows ? rows + (int64_t(L.step_rows.size()) - int64_t(L.order.size())) : nullptr;
  const int64_t* step_rows = rows;  // step t's rows in the sequences
  for (int64_t t = 0; t < steps; step_rows += L.active[size_t(t)], ++t) {
    PreparedBlock& step = *L.steps[size_t(t)];
    Scope& sc = *step.local_;
    const int64_t k = L.active[size_t(t)];
    for (size_t i = 0; i < L.step_inputs.size(); ++i) {  // x_t: row t of each running sequence
      const LoDTensor& x = c.in(R::inputs, i);
      LoDTensor& xt = detail::step_tensor(c, sc, L.step_inputs[i]);
      detail::resize_rows(c, xt, x.shape(), x.dtype(), k);
      detail::move_rows(c, xt.raw(), x.raw(), xt.bytes() / size_t(k), k, nullptr, step_rows);
    }
    for (size_t m = 0; m < L.ex_states.size(); ++m) {  // the memories: the state of step t-1, or the boot
      LoDTensor& pre = detail::step_tensor(c, sc, L.ex_states[m]);
      if (t > 0) {
        const LoDTensor& prev = detail::step_tensor(c, *L.steps[size_t(t - 1)]->local_, L.states[m]);
        detail::resize_rows(c, pre, prev.shape(), prev.dtype(), k);
        detail::copy_bytes(c, pre.raw(), prev.raw(), pre.bytes());
      } else if (int32_t b = L.boot_states[m]; b >= 0) {
        const LoDTensor& boot = c.in(R::initial_states, size_t(b));
        c.check(boot.rank() >= 1 && boot.dim(0) == int64_t(L.order.size()), "boot '{}' has {} rows for {} sequences", c.in_name(R::initial_states, size_t(b)),
                boot.rank() ? boot.dim(0) : 0, L.order.size());
        detail::resize_rows(c, pre, boot.shape(), boot.dtype(), k);
        detail::move_rows(c, pre.raw(), boot.raw(), k ? pre.bytes() / size_t(k) : 0, k, nullptr, order_rows);
      } else {
        const Variable& v = sb.var(L.ex_states[m]);
        detail::resize_rows(c, pre, v.shape(), v.dtype(), k);
        detail::zero(c, pre);
      }
    }
    run_steps(step, {}, 1);
    for (size_t j = 0; j < L.step_outputs.size(); ++j) {  // the step's rows go back to their sequences
      const LoDTensor& y = detail::step_tensor(c, sc, L.step_outputs[j]);
      c.check(y.initialized() && y.rank() >= 1 && y.dim(0) == k, "step output '{}' must have one row per running sequence ({}) at step {}, got {}",
              L.step_outputs[j], k, t, y.shape());
      LoDTensor& out = c.out(R::outputs, j);
      if (t == 0) {
        detail::resize_rows(c, out, y.shape(), y.dtype(), x0.dim(0));
        out.set_lod(x0.lod());
      }
      const size_t rb = y.bytes() / size_t(k);
      c.check(out.bytes() == rb * size_t(x0.dim(0)) && out.dtype() == y.dtype(), "step output '{}' changed shape between steps: {} at step {}", L.step_outputs[j],
              y.shape(), t);
      detail::move_rows(c, out.raw(), y.raw(), rb, k, step_rows, nullptr);
    }
  }
  if (steps == 0)  // no step ran (no sequence, or only empty ones): the outputs have no rows
    for (size_t j = 0; j < L.step_outputs.size(); ++j) {
      const Variable& v = sb.var(L.step_outputs[j]);
      Shape sh = v.shape();
      for (auto& d : sh) d = std::max<int64_t>(d, 0);
      LoDTensor& out = c.out(R::outputs, j);
      detail::resize_rows(c, out, sh, v.dtype(), x0.dim(0));
      out.set_lod(x0.lod());
    }
}

namespace detail {

/// Before a loop's steps add into a gradient: it holds nothing (its storage and capacity are kept), on the
/// kernel's place.
inline void reset_sum(const KernelContext& c, Value& v) {
  if (LoDTensor* t = v.tensor_if()) t->resize(Shape{0}, t->dtype(), c.place());
  else if (v.is_list()) v.list().clear();
  else if (v.is_selected_rows()) {
    SelectedRows& r = v.selected_rows();
    r.rows.clear();
    r.value = Tensor();
  }
}

/// Whether reset_sum's "nothing" is still there.
inline bool holds_nothing(const Value& v) {
  if (const LoDTensor* t = v.tensor_if()) return !t->initialized() || t->numel() == 0;
  return v.empty();
}

/// dst = dst + src for a gradient the steps of a loop sum: tensors of f32 / f64; tensor arrays entry by entry
/// (an empty entry is zero); sparse rows (SelectedRows, an embedding's gradient) by appending rows, as Fluid's
/// sum does. A dst that holds nothing yet takes a copy.
inline void accumulate(const KernelContext& c, Value& dst, const Value& src, const std::string& name) {
  if (const LoDTensor* st = src.tensor_if()) {
    if (!st->initialized()) return;
    c.check(!dst.is_selected_rows() || dst.selected_rows().rows.empty(), "the gradient of '{}' is sparse at one step and dense at another", name);
    if (dst.is_selected_rows()) dst.reset();
    LoDTensor* dt = dst.tensor_if();
    if (!dt || !dt->initialized() || dt->numel() == 0) {
      dst.tensor().copy_from(*st);
      dst.tensor().set_lod(st->lod());
      return;
    }
    if (st->numel() == 0) return;
    c.check(dt->numel() == st->numel(), "the gradient of '{}' is {} at one step and {} at another", name, st->shape(), dt->shape());
    add_elements(c, *dt, *st, st->numel());
    return;
  }
  if (src.is_list()) {
    const auto& sl = const_cast<Value&>(src).list();
    auto& dl = dst.list();
    if (dl.size() < sl.size()) dl.resize(sl.size());
    for (size_t k = 0; k < sl.size(); ++k) {
      if (!sl[k].initialized() || sl[k].numel() == 0) continue;
      if (!dl[k].initialized() || dl[k].numel() == 0) {
        dl[k].copy_from(sl[k]);
        dl[k].set_lod(sl[k].lod());
        continue;
      }
      c.check(dl[k].numel() == sl[k].numel(), "the gradient of '{}' entry {} is {} at one step and {} at another", name, k, sl[k].shape(), dl[k].shape());
      add_elements(c, dl[k], sl[k], sl[k].numel());
    }
    return;
  }
  if (src.is_selected_rows()) {
    const SelectedRows& sr = const_cast<Value&>(src).selected_rows();
    if (sr.rows.empty()) return;
    c.check(holds_nothing(dst) || dst.is_selected_rows(), "the gradient of '{}' is dense at one step and sparse at another", name);
    if (!dst.is_selected_rows()) dst.reset();
    SelectedRows& dr = dst.selected_rows();
    if (dr.rows.empty()) {
      dr.rows = sr.rows, dr.height = sr.height, dr.value = sr.value.clone();
      return;
    }
    c.check(dr.height == sr.height && dr.value.dtype() == sr.value.dtype() && dr.value.numel() / int64_t(dr.rows.size()) == sr.value.numel() / int64_t(sr.rows.size()),
            "the sparse gradient of '{}' changes its shape between steps", name);
    Shape shape = dr.value.shape();
    shape[0] = int64_t(dr.rows.size() + sr.rows.size());
    Tensor joined(shape, dr.value.dtype(), dr.value.place());
    copy_bytes(c, joined.raw(), dr.value.raw(), dr.value.bytes());
    copy_bytes(c, static_cast<char*>(joined.raw()) + dr.value.bytes(), sr.value.raw(), sr.value.bytes());
    dr.rows.insert(dr.rows.end(), sr.rows.begin(), sr.rows.end());
    dr.value = std::move(joined);
  }
}

/// A zero gradient for `x`: zeros of its shape (a tensor), or as many empty entries (a tensor array).
inline void zero_like(const KernelContext& c, Value& g, const Value& x) {
  if (const LoDTensor* xt = x.tensor_if()) {
    LoDTensor& gt = g.tensor();
    gt.resize(xt->shape(), xt->dtype(), c.place());
    zero(c, gt);
    gt.set_lod(xt->lod());
  } else if (x.is_list()) {
    auto& gl = g.list();
    gl.assign(const_cast<Value&>(x).list().size(), LoDTensor());
  }
}

/// A copy of a loop variable's value that no later step writes into: tensors deep, arrays entry by entry.
inline void copy_value(Value& dst, const Value& src) {
  if (const LoDTensor* st = src.tensor_if()) {
    LoDTensor& dt = dst.tensor();
    if (st->initialized()) dt.copy_from(*st);
    dt.set_lod(st->lod());
  } else if (src.is_list()) {
    const auto& sl = const_cast<Value&>(src).list();
    auto& dl = dst.list();
    dl.resize(sl.size());
    for (size_t k = 0; k < sl.size(); ++k) {
      if (sl[k].initialized()) dl[k].copy_from(sl[k]);
      dl[k].set_lod(sl[k].lod());
    }
  } else {
    dst = src;
  }
}

}  // namespace detail

OAR_FUNC void Executor::run_conditional_grad(PreparedBlock& p, PreparedBlock::Step& s, bool ran) {
  using G = ops::ConditionalBlockGrad;
  const KernelContext& c = s.ctx;
  const Operator& op = *s.op;
  if (!s.loop) {  // the names of the seeds and of the inputs' gradients, made once (no allocation per run)
    s.loop = std::make_shared<PreparedBlock::Loop>();
    for (auto& n : op.input(G::out)) s.loop->output_seeds.push_back(grad_var_name(n));
    for (auto& n : op.input(G::input)) s.loop->parameter_grads.push_back(grad_var_name(n));
  }
  if (ran) {
    Value::ScopeList& scopes = c.in_value(G::scope)->scopes();
    c.check(scopes.size() == 1, "the forward conditional_block has not run: run the forward pass first");
    // The grad block lives in a child of the forward's scope, where its ops find the forward's activations;
    // prepared once, again only if the forward's scope changed.
    if (!s.sub || s.sub->scope_ != scopes[0]) s.sub = prepare(p.program_, *scopes[0], op.sub_block(), p.options_);
    const std::vector<std::string>& seeds = s.loop->output_seeds;
    for (size_t k = 0; k < seeds.size(); ++k) {  // the seeds: the outputs' gradients, shared
      Value* seed = s.sub->local_->find_local(seeds[k]);
      const Value* g = k < c.num_in(G::out_grad) ? c.in_value(G::out_grad, k) : nullptr;
      if (!seed) continue;
      if (g && !g->empty()) *seed = *g;
      else {
        const Value* o = c.in_value(G::out, k);
        c.check(o != nullptr, "Out@GRAD {} has no Out", k);
        detail::zero_like(c, *seed, *o);
      }
    }
    run_steps(*s.sub, {}, 1);
    for (auto& n : seeds)  // let go of the shared storage, which the writer of Out@GRAD reuses next run
      if (Value* seed = s.sub->local_->find_local(n); seed && seed->tensor_if()) seed->tensor_if()->release_storage();
  }
  const std::vector<std::string>& inputs = op.input(G::input);
  for (size_t i = 0; i < c.num_out(G::input_grad); ++i) {
    if (!c.has_out(G::input_grad, i)) continue;
    const Value* v = ran ? s.sub->local_->find_local(s.loop->parameter_grads[i]) : nullptr;
    Value* gv = c.out_value(G::input_grad, i);
    if (v && v->is_selected_rows()) {  // sparse rows (an embedding's): passed on as they are
      *gv = *v;
      continue;
    }
    if (gv->is_selected_rows()) gv->reset();
    const LoDTensor& x = c.in(G::input, i);
    LoDTensor& gx = c.out(G::input_grad, i);
    if (v && v->tensor_if() && v->tensor_if()->initialized()) {
      const LoDTensor& src = *v->tensor_if();
      c.check(src.numel() == x.numel(), "the gradient of '{}' is {} inside the block, but '{}' is {}", inputs[i], src.shape(), inputs[i], x.shape());
      gx.copy_from(src);
    } else {
      // Not run, or not reached inside the block: a zero gradient (see ops::ConditionalBlockGrad).
      gx.resize(x.shape(), x.dtype());
      detail::zero(c, gx);
    }
    gx.set_lod(x.lod());
  }
}

OAR_FUNC void Executor::run_recurrent_grad(PreparedBlock& p, PreparedBlock::Step& s) {
  using G = ops::RecurrentGrad;
  const KernelContext& c = s.ctx;
  const Operator& op = *s.op;
  if (!s.loop) {
    s.loop = make_loop(c);
    auto& L = *s.loop;
    L.output_seeds = op.attr(G::output_seeds), L.state_seeds = op.attr(G::state_seeds);
    // From here on the names are those of gradients in the grad block.
    for (auto& n : L.step_inputs) n = grad_var_name(n);
    for (auto& n : L.ex_states) n = grad_var_name(n);
    for (auto& n : op.input(G::parameters)) L.parameter_grads.push_back(grad_var_name(n));
  }
  PreparedBlock::Loop& L = *s.loop;
  const LoDTensor& x0 = c.in(G::inputs, 0);
  detail::recurrent_layout(c, x0, L.start, L.order, L.active, L.step_rows);
  const int64_t* rows = detail::rows_on_place(c, L.step_rows, L.step_rows_device);
  const int64_t steps = int64_t(L.active.size());
  Value::ScopeList& scopes = c.in_value(G::step_scopes)->scopes();
  c.check(int64_t(scopes.size()) == steps, "the forward recurrent op ran {} steps, but the inputs have {}: run the forward pass first", scopes.size(), steps);
  for (int64_t t = 0; t < steps; ++t) {
    if (int64_t(L.steps.size()) <= t) L.steps.push_back(nullptr);
    auto& g = L.steps[size_t(t)];
    if (!g || g->scope_ != scopes[size_t(t)]) g = L.steps[0] && t > 0 ? prepare_like(*L.steps[0], *scopes[size_t(t)]) : prepare(p.program_, *scopes[size_t(t)], L.block, p.options_);
  }
  // The outer gradients start at zero; the steps fill or add to them.
  for (size_t i = 0; i < c.num_out(G::inputs_grad); ++i)
    if (c.has_out(G::inputs_grad, i)) {
      const LoDTensor& x = c.in(G::inputs, i);
      LoDTensor& gx = c.out(G::inputs_grad, i);
      gx.resize(x.shape(), x.dtype());
      gx.set_lod(x.lod());
      detail::zero(c, gx);
    }
  for (size_t i = 0; i < c.num_out(G::initial_states_grad); ++i)
    if (c.has_out(G::initial_states_grad, i)) {
      const LoDTensor& v = c.in(G::initial_states, i);
      LoDTensor& gv = c.out(G::initial_states_grad, i);
      gv.resize(v.shape(), v.dtype());
      detail::zero(c, gv);
    }
  for (size_t i = 0; i < c.num_out(G::parameters_grad); ++i)  // the steps add into them (dense or sparse rows)
    if (c.has_out(G::parameters_grad, i)) detail::reset_sum(c, *c.out_value(G::parameters_grad, i));
  const std::vector<std::string>& params = op.input(G::parameters);
  int64_t step_begin = int64_t(L.step_rows.size() - L.order.size());  // past the last step's rows in step_rows
  for (int64_t t = steps - 1; t >= 0; --t) {
    PreparedBlock& gp = *L.steps[size_t(t)];
    Scope& gs = *gp.local_;
    const int64_t k = L.active[size_t(t)];
    const int64_t k_next = t + 1 < steps ? L.active[size_t(t + 1)] : 0;
    step_begin -= k;
    const int64_t* step_rows = rows ? rows + step_begin : nullptr;  // step t's rows in the sequences
    for (size_t j = 0; j < L.output_seeds.size(); ++j) {  // the gradient of the step's output rows
      const LoDTensor& gy = c.in(G::outputs_grad, j);
      LoDTensor& seed = detail::step_tensor(c, gs, L.output_seeds[j]);
      detail::resize_rows(c, seed, gy.shape(), gy.dtype(), k);
      detail::move_rows(c, seed.raw(), gy.raw(), seed.bytes() / size_t(k), k, nullptr, step_rows);
    }
    for (size_t m = 0; m < L.state_seeds.size(); ++m) {  // plus the memory's gradient from step t+1
      LoDTensor& seed = detail::step_tensor(c, gs, L.state_seeds[m]);
      if (std::find(L.output_seeds.begin(), L.output_seeds.end(), L.state_seeds[m]) == L.output_seeds.end() &&
          std::find(L.state_seeds.begin(), L.state_seeds.begin() + ptrdiff_t(m), L.state_seeds[m]) == L.state_seeds.begin() + ptrdiff_t(m)) {
        const LoDTensor& st = detail::step_tensor(c, *scopes[size_t(t)], L.states[m]);
        detail::resize_rows(c, seed, st.shape(), st.dtype(), k);
        detail::zero(c, seed);
      }
      if (k_next == 0) continue;
      const Value* pv = L.steps[size_t(t + 1)]->local_->find_local(L.ex_states[m]);
      if (pv && pv->tensor_if() && pv->tensor_if()->initialized()) {
        const LoDTensor& g_pre = *pv->tensor_if();
        c.check(g_pre.rank() >= 1 && g_pre.dim(0) == k_next && g_pre.numel() / k_next == seed.numel() / k, "the gradient of memory '{}' is {} at step {}",
                L.ex_states[m], g_pre.shape(), t + 1);
        detail::add_elements(c, seed, g_pre, g_pre.numel());
      }
    }
    run_steps(gp, {}, 1);
    for (size_t i = 0; i < L.step_inputs.size(); ++i) {
      if (!c.has_out(G::inputs_grad, i)) continue;
      const Value* v = gs.find_local(L.step_inputs[i]);
      if (!v || !v->tensor_if() || !v->tensor_if()->initialized()) continue;  // x does not reach the outputs
      const LoDTensor& gxt = *v->tensor_if();
      LoDTensor& gx = c.out(G::inputs_grad, i);
      c.check(gxt.rank() >= 1 && gxt.dim(0) == k && gxt.bytes() / size_t(k) * size_t(gx.dim(0)) == gx.bytes(), "the gradient of step input '{}' is {}",
              L.step_inputs[i], gxt.shape());
      detail::move_rows(c, gx.raw(), gxt.raw(), gxt.bytes() / size_t(k), k, step_rows, nullptr);
    }
    for (size_t i = 0; i < params.size(); ++i) {  // a parameter's gradient is the sum over the steps
      if (!c.has_out(G::parameters_grad, i)) continue;
      const Value* v = gs.find_local(L.parameter_grads[i]);
      if (!v || v->empty()) continue;
      c.check(!v->tensor_if() || !v->tensor_if()->initialized() || v->tensor_if()->numel() == c.in(G::parameters, i).numel(),
              "the gradient of '{}' is {} inside the step", params[i], v->tensor_if() ? v->tensor_if()->shape() : Shape{});
      detail::accumulate(c, *c.out_value(G::parameters_grad, i), *v, params[i]);
    }
    if (t == 0)
      for (size_t m = 0; m < L.ex_states.size(); ++m) {  // the boot's gradient: the memories' at step 0
        const int32_t b = L.boot_states[m];
        if (b < 0 || !c.has_out(G::initial_states_grad, size_t(b))) continue;
        const Value* v = gs.find_local(L.ex_states[m]);
        if (!v || !v->tensor_if() || !v->tensor_if()->initialized()) continue;
        const LoDTensor& gpre = *v->tensor_if();
        LoDTensor& gb = c.out(G::initial_states_grad, size_t(b));
        const size_t rb = gpre.bytes() / size_t(k);
        c.check(rb * size_t(gb.dim(0)) == gb.bytes(), "the gradient of memory '{}' is {}", L.ex_states[m], gpre.shape());
        // gb[order[r]] += gpre[r]: each boot row is some sequence's and receives once.
        const int64_t w = gb.dim(0) ? gb.numel() / gb.dim(0) : 0;
        for (int64_t r = 0; r < k; ++r) detail::add_elements(c, gb, gpre, w, L.order[size_t(r)] * w, r * w);
      }
  }
  for (size_t i = 0; i < params.size(); ++i)  // not reached at any step: zeros
    if (c.has_out(G::parameters_grad, i) && detail::holds_nothing(*c.out_value(G::parameters_grad, i)))
      detail::zero_like(c, *c.out_value(G::parameters_grad, i), *c.in_value(G::parameters, i));
}

OAR_FUNC void Executor::run_while(PreparedBlock& p, PreparedBlock::Step& s) {
  using W = ops::While;
  const KernelContext& c = s.ctx;
  const Operator& op = *s.op;
  if (!s.loop) {
    s.loop = std::make_shared<PreparedBlock::Loop>();
    s.loop->block = op.sub_block();
    s.loop->ex_states = op.attr(W::ex_states), s.loop->states = op.attr(W::states), s.loop->condition = op.attr(W::next_condition);
  }
  PreparedBlock::Loop& L = *s.loop;
  const int64_t max_it = op.attr(W::max_iterations);
  auto truth = [&](const Value* v, const std::string& what) {
    c.check(v && v->tensor_if() && v->tensor_if()->initialized(), "the condition '{}' has no value", what);
    const LoDTensor& t = *v->tensor_if();
    c.check(t.dtype() == DType::boolean && t.numel() == 1, "the condition '{}' must be one bool, got {} {}", what, oar::name(t.dtype()), t.shape());
    if (t.place().is_cpu()) return t.data<bool>()[0];
    return t.to(cpu()).data<bool>()[0];  // a device's condition: the host waits for it (the loop is driven here)
  };
  bool go = truth(c.in_value(W::condition), c.in_name(W::condition));
  Value::ScopeList& scopes = c.out_value(W::step_scopes)->scopes();
  scopes.clear();
  const size_t m_count = L.ex_states.size();
  std::vector<const Value*>& cur = L.current;
  cur.resize(m_count);
  for (size_t m = 0; m < m_count; ++m) {
    cur[m] = c.in_value(W::init_states, m);
    c.check(cur[m] && !cur[m]->empty(), "loop variable '{}' has no initial value", c.in_name(W::init_states, m));
  }
  int64_t t = 0;
  for (; go; ++t) {
    c.check(t < max_it, "the loop ran {} steps and its condition still holds (max_iterations; the body must make '{}' false)", t, L.condition);
    if (int64_t(L.steps.size()) <= t)
      L.steps.push_back(L.steps.empty() ? prepare(p.program_, *p.local_, L.block, p.options_) : prepare_like(*L.steps[0], *p.local_));
    PreparedBlock& step = *L.steps[size_t(t)];
    Scope& sc = *step.local_;
    scopes.push_back(&sc);
    for (size_t m = 0; m < m_count; ++m) {
      Value* ex = sc.find_local(L.ex_states[m]);
      c.check(ex != nullptr, "the body has no variable '{}'", L.ex_states[m]);
      // A previous step's state is shared (the body only reads it); the initial value is copied, so that its
      // writer outside the loop keeps its storage to itself.
      if (t == 0) detail::copy_value(*ex, *cur[m]);
      else if (ex != cur[m]) *ex = *cur[m];
      // The next step's view of this step's state, from the last run, lets go of it, so that this step
      // writes its state into the same storage again.
      if (size_t(t) + 1 < L.steps.size())
        if (Value* nx = L.steps[size_t(t) + 1]->local_->find_local(L.ex_states[m]); nx && nx->tensor_if()) nx->tensor_if()->release_storage();
    }
    run_steps(step, {}, 1);
    for (size_t m = 0; m < m_count; ++m) {
      cur[m] = sc.find(L.states[m]);
      c.check(cur[m] && !cur[m]->empty(), "loop variable '{}' has no value after step {}", L.states[m], t);
    }
    go = truth(sc.find(L.condition), L.condition);
  }
  for (size_t m = 0; m < m_count; ++m)
    if (c.has_out(W::final_states, m)) detail::copy_value(*c.out_value(W::final_states, m), *cur[m]);
}

OAR_FUNC void Executor::run_while_grad(PreparedBlock& p, PreparedBlock::Step& s) {
  using G = ops::WhileGrad;
  const KernelContext& c = s.ctx;
  const Operator& op = *s.op;
  if (!s.loop) {
    s.loop = std::make_shared<PreparedBlock::Loop>();
    auto& L = *s.loop;
    L.block = op.sub_block();
    L.states = op.attr(G::states), L.state_seeds = op.attr(G::state_seeds), L.output_seeds = op.attr(G::out_seeds);
    for (auto& n : op.attr(G::ex_states)) L.ex_states.push_back(grad_var_name(n));
    for (auto& n : op.input(G::x)) L.parameter_grads.push_back(grad_var_name(n));
  }
  PreparedBlock::Loop& L = *s.loop;
  Value::ScopeList& scopes = c.in_value(G::step_scopes)->scopes();
  const int64_t steps = int64_t(scopes.size());
  for (int64_t t = 0; t < steps; ++t) {
    if (int64_t(L.steps.size()) <= t) L.steps.push_back(nullptr);
    auto& g = L.steps[size_t(t)];
    if (!g || g->scope_ != scopes[size_t(t)]) g = L.steps[0] && t > 0 ? prepare_like(*L.steps[0], *scopes[size_t(t)]) : prepare(p.program_, *scopes[size_t(t)], L.block, p.options_);
  }
  const std::vector<std::string>& xs = op.input(G::x);
  for (size_t i = 0; i < c.num_out(G::x_grad); ++i) {
    if (!c.has_out(G::x_grad, i)) continue;
    detail::reset_sum(c, *c.out_value(G::x_grad, i));
  }
  const size_t m_count = L.states.size();
  for (int64_t t = steps - 1; t >= 0; --t) {
    PreparedBlock& gp = *L.steps[size_t(t)];
    Scope& gs = *gp.local_;
    for (size_t m = 0; m < m_count; ++m) {  // the gradient of the state this step hands on
      if (L.state_seeds[m] == kEmptyVarName) continue;
      Value* seed = gs.find_local(L.state_seeds[m]);
      c.check(seed != nullptr, "the grad block has no variable '{}'", L.state_seeds[m]);
      const Value* from = nullptr;
      if (t == steps - 1) from = c.in_value(G::final_states_grad, m);
      else from = L.steps[size_t(t + 1)]->local_->find_local(L.ex_states[m]);
      if (from && !from->empty() && (!from->tensor_if() || from->tensor_if()->initialized())) {
        detail::copy_value(*seed, *from);
      } else {
        const Value* st = scopes[size_t(t)]->find(L.states[m]);
        c.check(st != nullptr, "no value of '{}' at step {}", L.states[m], t);
        detail::zero_like(c, *seed, *st);
      }
    }
    for (size_t j = 0; j < L.output_seeds.size(); ++j) {  // the gradients of the arrays the body writes, shared
      Value* seed = gs.find_local(L.output_seeds[j]);
      const Value* g = c.in_value(G::out_grad, j);
      c.check(seed != nullptr, "the grad block has no variable '{}'", L.output_seeds[j]);
      if (g && !g->empty()) *seed = *g;
      else seed->reset();
    }
    run_steps(gp, {}, 1);
    for (size_t i = 0; i < xs.size(); ++i) {  // an outer input's gradient is the sum over the steps
      if (!c.has_out(G::x_grad, i)) continue;
      const Value* v = gs.find_local(L.parameter_grads[i]);
      if (!v || v->empty()) continue;
      detail::accumulate(c, *c.out_value(G::x_grad, i), *v, xs[i]);
    }
  }
  for (size_t i = 0; i < xs.size(); ++i) {  // not reached at any step: zeros
    if (!c.has_out(G::x_grad, i)) continue;
    Value* gx = c.out_value(G::x_grad, i);
    const bool none = gx->is_list() ? false : detail::holds_nothing(*gx) && !(gx->tensor_if() && c.in_value(G::x, i)->tensor_if() && c.in(G::x, i).numel() == 0);
    if (none) detail::zero_like(c, *gx, *c.in_value(G::x, i));
    else if (gx->is_list() && c.in_value(G::x, i)->is_list()) gx->list().resize(std::max(gx->list().size(), c.in_value(G::x, i)->list().size()));
  }
  for (size_t m = 0; m < m_count; ++m) {  // the initial values' gradients: the loop variables' at step 0
    if (!c.has_out(G::init_states_grad, m)) continue;
    Value* gi = c.out_value(G::init_states_grad, m);
    const Value* from = steps > 0 ? L.steps[0]->local_->find_local(L.ex_states[m]) : c.in_value(G::final_states_grad, m);
    if (from && !from->empty() && (!from->tensor_if() || from->tensor_if()->initialized())) detail::copy_value(*gi, *from);
    else detail::zero_like(c, *gi, *c.in_value(G::init_states, m));
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

OAR_FUNC size_t Executor::fingerprint(const Program& p) {
  size_t h = p.num_blocks();
  for (size_t i = 0; i < p.num_blocks(); ++i) h = h * 1000003u + p.block(int(i)).num_ops() * 131u + p.block(int(i)).num_vars();
  return h;
}

OAR_FUNC std::shared_ptr<PreparedBlock> Executor::prepare_like(const PreparedBlock& proto, Scope& scope) {
  auto p = std::make_shared<PreparedBlock>();
  p->program_ = proto.program_;
  p->block_ = proto.block_;
  p->options_ = proto.options_;
  bind(*p, scope, &proto);
  return p;
}

namespace detail {
/// Whether `n` fills a state slot of `op` (its own value from an earlier run: never a feed).
inline bool is_state_input(const OpDef& def, const Operator& op, const std::string& n) {
  for (const SlotArgs& s : op.inputs())
    if (const SlotDef* sd = def.find_input(s.slot); sd && sd->state && std::find(s.args.begin(), s.args.end(), n) != s.args.end()) return true;
  return false;
}
}  // namespace detail

OAR_FUNC void Executor::bind(PreparedBlock& p, Scope& scope, const PreparedBlock* proto) {
  if (p.scope_ && p.local_) p.scope_->drop(p.local_);
  p.steps_.clear();
  p.required_feeds_.clear();
  p.scope_ = &scope;
  p.local_ = &scope.new_scope();
  p.arrays_.clear();
  const Block& b = p.program_->block(p.block_);
  for (const Block* blk = &b; blk; blk = blk->parent()) {
    // A sub-block's own variables always live in its scope: a recurrent step's in its step scope, whatever the
    // outer scopes hold (its grad block declares the per-step parameter gradients under the outer names).
    const bool own = blk == &b && b.parent();
    for (auto* v : blk->vars()) {
      if (v->persistable()) {
        if (!scope.find(v->name())) scope.var(v->name()).init(v->kind());
      } else if (!p.local_->find_local(v->name()) && (own || !scope.find(v->name()))) {
        // A non-persistable variable the caller's scope already holds (a gradient computed by an earlier
        // program run in that scope, say) is used from there; the rest are temporaries of this run.
        Value& val = p.local_->var(v->name());
        val.init(v->kind());
        if (v->kind() == VarKind::lod_tensor_array) p.arrays_.push_back(&val);
      }
    }
  }
  std::set<std::string> written;
  for (auto* op : b.ops()) {
    if (op->type() == ops::Feed::type) {  // a program's own feed ops name what must be fed
      for (auto& n : op->output(ops::Feed::out)) {
        written.insert(n);
        p.required_feeds_.push_back(n);
      }
      continue;
    }
    const OpDef* def = OpRegistry::instance().find(op->type());
    for (auto& n : op->input_names()) {
      if (written.count(n) || n == "@EMPTY@" || (def && detail::is_state_input(*def, *op, n))) continue;
      const Variable* v = b.find_var(n);
      if (v && !v->persistable() && v->kind() == VarKind::lod_tensor && !scope.find(n) &&
          std::find(p.required_feeds_.begin(), p.required_feeds_.end(), n) == p.required_feeds_.end())
        p.required_feeds_.push_back(n);
    }
    for (auto& n : op->output_names()) written.insert(n);
  }
  const bool reuse = proto && proto->program_ == p.program_ && proto->block_ == p.block_ && proto->steps_.size() == b.num_ops();
  for (auto* op : b.ops()) {
    if (reuse) {
      const PreparedBlock::Step& ps = proto->steps_[p.steps_.size()];
      p.steps_.push_back({op, ps.fn, ps.attrs, KernelContext(*op, *p.local_, *dev_, ps.attrs.get()), {}, {}});
      continue;
    }
    const OpDef& d = op_def(op->type());
    // feed and fetch ops move values through the program's feed/fetch lists, which are no model state.
    if (p.options_.read_only_persistables && op->type() != ops::Feed::type && op->type() != ops::Fetch::type)
      for (auto& n : op->output_names())
        if (const Variable* v = b.find_var(n); v && v->persistable())
          throw Error(fmt::format("op '{}' writes the persistable variable '{}' in a program that may only read them (an Evaluator's: "
                                  "parameters and running statistics are shared by every evaluator of the model)",
                                  op->type(), n),
                      op->origin());
    KernelFn fn = nullptr;
    std::shared_ptr<const void> attrs;
    if (!d.kernel_free) {
      const KernelEntry& k = KernelRegistry::instance().get(op->type(), place_, op->origin());
      fn = k.on(place_);
      attrs = k.attrs(*op, d.is_grad ? OpRegistry::instance().find(op->type().substr(0, op->type().size() - 5)) : &d);
    } else if (op->type() != ops::Feed::type && op->type() != ops::Fetch::type && op->type() != ops::ConditionalBlock::type &&
               op->type() != ops::ConditionalBlockGrad::type && op->type() != ops::Recurrent::type && op->type() != ops::RecurrentGrad::type &&
               op->type() != ops::While::type && op->type() != ops::WhileGrad::type) {
      throw Error(fmt::format("op '{}' is not supported by this executor yet", op->type()), op->origin());
    } else if (op->type() != ops::Feed::type && op->type() != ops::Fetch::type) {
      // The control ops use their variables' values directly (step scopes, states, arrays), not through a
      // kernel's checked in() / out(): each must be one (a program read from a damaged file may name none).
      for (const auto* list : {&op->inputs(), &op->outputs()})
        for (const SlotArgs& s : *list)
          for (const std::string& n : s.args)
            if (n != kEmptyVarName && !p.local_->find(n))
              throw Error(fmt::format("op '{}': {} '{}' is no variable of the program", op->type(), s.slot, n), op->origin());
    }
    p.steps_.push_back({op, fn, attrs, KernelContext(*op, *p.local_, *dev_, attrs.get()), {}, {}});
  }
  p.free_.clear();
  p.plan();
  p.graph_ = {};
  if (place_.is_cuda()) {
    p.group(place_);
    // What a CUDA graph of the block must see unchanged, and whether one may be made of it at all: not with
    // control flow, nor with a random op drawing its seed from the executor (its draw would be replayed), nor
    // with collectives (their kernels hand work to the communicator's thread on the host).
    std::set<const Value*> seen;
    for (const PreparedBlock::Step& st : p.steps_) {
      const Operator& op = *st.op;
      if (op.sub_block() >= 0) p.graph_.off = true;
      if (op.type() == ops::CAllreduceSum::type || op.type() == ops::CReduceSum::type || op.type() == ops::CBroadcast::type ||
          op.type() == ops::CSyncCommStream::type)
        p.graph_.off = true;
      if (op.type() == ops::Dropout::type && !op.attr_or(ops::Dropout::fix_seed, false)) p.graph_.off = true;
      if ((op.type() == ops::UniformRandom::type || op.type() == ops::GaussianRandom::type || op.type() == ops::TruncatedGaussianRandom::type) &&
          op.attr_or(ops::UniformRandom::seed, 0) == 0)
        p.graph_.off = true;
      for (const auto& names : {op.input_names(), op.output_names()})
        for (const std::string& n : names)
          // SelectedRows too: the run-time check turns graphs off for them (their rows are host data).
          if (const Value* v = p.local_->find(n); v && (v->is_tensor() || v->is_selected_rows()) && seen.insert(v).second) p.graph_.values.push_back(v);
    }
  }
}

OAR_FUNC void PreparedBlock::group(const Place& place) {
  grouping_ = place.is_cuda();
  for (Step& s : steps_) {
    s.group_fn = nullptr;
    s.group.clear();
    s.grouped = false;
  }
  for (size_t i = 0; i < steps_.size();) {
    Step& first = steps_[i];
    const KernelEntry* k = first.fn ? KernelRegistry::instance().find(first.op->type()) : nullptr;
    const bool alone = first.acquire.empty() && first.release.empty();
    size_t j = i + 1;
    if (k && k->cuda_group && alone && place.is_cuda()) {
      // A group's members all read their inputs before any writes: an op that reads or writes what an earlier
      // member writes (one Param updated twice, a power two ops share), or writes what an earlier member reads,
      // starts the next group, as it would run after it one at a time.
      std::unordered_set<std::string> written, read;
      const auto join = [&](const Operator& op) {
        for (const std::string& n : op.input_names()) read.insert(n);
        for (const std::string& n : op.output_names()) written.insert(n);
      };
      const auto conflicts = [&](const Operator& op) {
        for (const std::string& n : op.input_names())
          if (written.contains(n)) return true;
        for (const std::string& n : op.output_names())
          if (written.contains(n) || read.contains(n)) return true;
        return false;
      };
      join(*first.op);
      while (j < steps_.size() && steps_[j].fn && steps_[j].op->type() == first.op->type() && steps_[j].op->attrs() == first.op->attrs() &&
             steps_[j].acquire.empty() && steps_[j].release.empty() && !conflicts(*steps_[j].op))
        join(*steps_[j++].op);
    }
    if (j - i > 1) {
      first.group_fn = k->cuda_group;
      for (size_t m = i; m < j; ++m) {
        first.group.push_back(&steps_[m].ctx);
        steps_[m].grouped = m > i;
      }
    }
    i = j;
  }
}

}  // namespace oar
