// oar/runtime/executor-inl.hpp: the implementation of executor.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/runtime/executor.hpp"

#include <algorithm>

#include "oar/device/cuda.hpp"
#include "oar/ops/control_flow.hpp"
#include "oar/ops/feed_fetch.hpp"
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
    if (t.initialized() || need == 0) continue;
    size_t best = free_.size();
    for (size_t j = 0; j < free_.size(); ++j)
      if (free_[j]->bytes() >= need && (best == free_.size() || free_[j]->bytes() < free_[best]->bytes())) best = j;
    if (best == free_.size()) continue;
    t.adopt_storage(std::move(free_[best]));
    free_[best] = std::move(free_.back());
    free_.pop_back();
  }
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
  for (auto& t : out) t = LoDTensor();  // last run's fetches let go of their storage, so this run reuses it
  if (p.scope_ != &scope) bind(p, scope);
  const Block& b = p.program_->block(p.block_);
  for (auto& [name, t] : feeds) {
    Variable* v = b.find_var(name);
    if (!v) throw Error(fmt::format("feed '{}': no such variable in the program", name));
    check_feed(*v, t);
    Value* val = p.local_->find(name);
    if (t.place() == place_) {
      val->tensor() = t;  // shares storage: no copy
    } else {  // into the variable's own storage on this place, reused from run to run
      LoDTensor& dst = val->tensor();
      dst.set_place(place_);
      dst.copy_from(t);
      dst.set_lod(t.lod());
    }
  }
  for (auto& name : p.required_feeds_)
    if (!feeds.count(name)) {
      const Variable& v = b.var_recursive(name);
      throw Error(fmt::format("missing feed '{}' ({} {}): the program reads it but nothing computes it", name, oar::name(v.dtype()), v.shape().str()), v.origin());
    }
  for (auto& name : fetch)
    if (!b.find_var(name) && !p.local_->find(name)) throw Error(fmt::format("cannot fetch '{}': no such variable in the program", name));
  std::vector<const Value*>& fetched = p.fetched_;  // with recycling: what must survive the run
  fetched.clear();
  int64_t batch = 1;  // with recycling: the first-run size guess for unknown dims
  if (p.recycle_) {
    p.reclaim();
    for (auto& name : fetch)
      if (const Value* v = p.local_->find(name)) fetched.push_back(v);
    if (!feeds.empty() && feeds.begin()->second.rank() > 0) batch = feeds.begin()->second.dim(0);
  }
  for (size_t i = 0; i < p.steps_.size(); ++i) {
    auto& s = p.steps_[i];
    if (!s.fn) {
      if (s.op->sub_block() >= 0) run_control(p, s, int(i));
      continue;
    }
    try {
      if (p.recycle_) p.acquire(s, batch);
      detail::timed_op(*s.op, [&] { s.fn(s.ctx); });
      if (p.recycle_) p.release(s, fetched);
    } catch (Error& e) {
      e.add_context(fmt::format("while running op #{} '{}' of block {}", i, s.op->type(), p.block_), s.op->origin());
      throw;
    } catch (const std::exception& e) {
      throw Error(fmt::format("{}: {} (op #{} of block {})", s.op->type(), e.what(), i, p.block_), s.op->origin());
    }
  }
  out.resize(fetch.size());
  for (size_t i = 0; i < fetch.size(); ++i) {
    const std::string& name = fetch[i];
    Value* v = p.local_->find(name);
    if (!v || !v->is_tensor() || !v->tensor().initialized()) throw Error(fmt::format("cannot fetch '{}': it has no value after the run", name));
    const LoDTensor& t = v->tensor();
    if (t.place().is_cpu()) out[i] = t;
    else out[i] = LoDTensor(t.to(cpu()), t.lod());  // fetches come back to the host
  }
}

OAR_FUNC void Executor::run_control(PreparedBlock& p, PreparedBlock::Step& s, int index) {
  using Op = ops::ConditionalBlock;
  const KernelContext& c = s.ctx;
  bool go = true;
  if (s.op->attr(Op::is_scalar_condition)) {
    const LoDTensor& cond = c.in(Op::cond);
    c.check(cond.dtype() == DType::boolean && cond.numel() == 1, "Cond must be one bool, got {} {}", oar::name(cond.dtype()), cond.shape());
    go = cond.data<bool>()[0];
  } else {
    for (size_t k = 0; k < c.num_in(Op::cond); ++k) go = go && c.in(Op::cond, k).numel() > 0;
  }
  if (!go) return;
  try {
    if (!s.sub) s.sub = prepare(p.program_, *p.local_, s.op->sub_block(), p.options_);
    run(*s.sub, *p.local_);
  } catch (Error& e) {
    e.add_context(fmt::format("while running op #{} '{}' of block {}", index, s.op->type(), p.block_), s.op->origin());
    throw;
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

OAR_FUNC void Executor::bind(PreparedBlock& p, Scope& scope) {
  if (p.scope_ && p.local_) p.scope_->drop(p.local_);
  p.steps_.clear();
  p.required_feeds_.clear();
  p.scope_ = &scope;
  p.local_ = &scope.new_scope();
  const Block& b = p.program_->block(p.block_);
  for (const Block* blk = &b; blk; blk = blk->parent())
    for (auto* v : blk->vars()) {
      if (v->persistable()) {
        if (!scope.find(v->name())) scope.var(v->name()).init(v->kind());
      } else if (!p.local_->find_local(v->name()) && !scope.find(v->name())) {
        // A non-persistable variable the caller's scope already holds (a gradient computed by an earlier
        // program run in that scope, say) is used from there; the rest are temporaries of this run.
        p.local_->var(v->name()).init(v->kind());
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
    for (auto& n : op->input_names()) {
      if (written.count(n) || n == "@EMPTY@") continue;
      const Variable* v = b.find_var(n);
      if (v && !v->persistable() && v->kind() == VarKind::lod_tensor && !scope.find(n) &&
          std::find(p.required_feeds_.begin(), p.required_feeds_.end(), n) == p.required_feeds_.end())
        p.required_feeds_.push_back(n);
    }
    for (auto& n : op->output_names()) written.insert(n);
  }
  for (auto* op : b.ops()) {
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
    } else if (op->type() != ops::Feed::type && op->type() != ops::Fetch::type && op->type() != ops::ConditionalBlock::type) {
      throw Error(fmt::format("op '{}' is not supported by this executor yet", op->type()), op->origin());
    }
    p.steps_.push_back({op, fn, attrs, KernelContext(*op, *p.local_, *dev_, attrs.get()), {}, {}});
  }
  p.free_.clear();
  p.plan();
}

}  // namespace oar
