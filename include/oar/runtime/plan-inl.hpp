// oar/runtime/plan-inl.hpp: a prepared block's plan (part of the executor's implementation, included by
// executor-inl.hpp): buffer recycling by liveness, outputs that are views, and groups of steps run as one.
#pragma once
#include "oar/runtime/executor.hpp"

#include <algorithm>
#include <unordered_set>

#include "oar/runtime/kernel_registry.hpp"

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
