// oar/optim/collective-inl.hpp: the implementation of collective.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/optim/collective.hpp"

#include <algorithm>
#include <map>

#include "oar/core/error.hpp"
#include "oar/ir/program.hpp"
#include "oar/ops/batch_norm.hpp"
#include "oar/ops/collective.hpp"
#include "oar/ops/lookup_table.hpp"
#include "oar/ops/registry.hpp"
#include "oar/ops/scale.hpp"

namespace oar::optim {

OAR_FUNC void append_collective(Program& program, const std::string& loss, const std::vector<ParamGrad>& params_grads, const Collective& c) {
  OAR_CHECK(c.nranks >= 1, "data parallel: nranks must be >= 1, got {}", c.nranks);
  OAR_CHECK(c.bucket_bytes >= 0, "data parallel: bucket_bytes must be >= 0, got {}", c.bucket_bytes);
  Block& b = program.global_block();
  const std::string seed = grad_var_name(loss);
  if (c.sync_batch_norm)
    for (size_t i = 0; i < program.num_blocks(); ++i)
      for (Operator* op : program.block(int(i)).ops()) {
        const bool fwd = op->type() == ops::BatchNorm::type, grad = op->type() == std::string(ops::BatchNorm::type) + "_grad";
        if ((!fwd && !grad) || op->attr_or(ops::BatchNorm::is_test, false)) continue;
        op->set_type(std::string(ops::SyncBatchNorm::type) + (grad ? "_grad" : ""));
        op->set_attr(ops::SyncBatchNorm::ring_id, c.ring_id);
      }
  // Which op writes each variable last: a gradient is final after it.
  std::map<std::string, size_t> last_write;
  size_t seed_at = b.num_ops();
  for (size_t i = 0; i < b.num_ops(); ++i)
    for (auto& n : b.op(i).output_names()) {
      last_write[n] = i;
      if (n == seed && seed_at == b.num_ops()) seed_at = i;
    }
  OAR_CHECK(seed_at < b.num_ops(), "data parallel: the program has no backward pass of '{}' (no op writes '{}')", loss, seed);

  // Buckets in the order the gradients become final; a sparse gradient (selected rows) travels alone.
  struct Pending {
    size_t at;
    std::string grad;
    int64_t bytes;
    DType dtype;
    bool sparse;
  };
  std::vector<Pending> ready;
  for (auto& pg : params_grads) {
    auto it = last_write.find(pg.grad);
    OAR_CHECK(it != last_write.end(), "data parallel: no op writes '{}', the gradient of '{}'", pg.grad, pg.param);
    const Variable& v = b.var(pg.grad);
    const int64_t n = std::max<int64_t>(v.shape().numel(), 0);
    // An is_sparse embedding's grad op writes selected rows (its variable's kind says so only at run time).
    const Operator& writer = b.op(it->second);
    const bool sparse = v.kind() == VarKind::selected_rows ||
                        (writer.type() == std::string(ops::LookupTable::type) + "_grad" && writer.attr_or(ops::LookupTable::is_sparse, false));
    ready.push_back({it->second, pg.grad, n * int64_t(size_of(v.dtype())), v.dtype(), sparse});
  }
  std::stable_sort(ready.begin(), ready.end(), [](const Pending& x, const Pending& y) { return x.at < y.at; });
  struct Insert {
    size_t after;
    std::vector<std::string> grads;
    int root = -1;  // c_reduce_sum to this rank; -1: c_allreduce_sum
  };
  std::vector<Insert> inserts;
  // One open bucket per destination: every rank (-1), or with reduce_to_owner each parameter's owner.
  std::map<std::string, int> owner;
  if (c.reduce_to_owner) owner = deal_out(b, params_grads, c.nranks);
  std::map<std::string, std::string> param_of;
  for (auto& pg : params_grads) param_of[pg.grad] = pg.param;
  struct Open {
    std::vector<std::string> grads;
    int64_t bytes = 0;
    DType dtype = DType::f32;
    size_t last_at = 0;
  };
  std::map<int, Open> open;
  auto flush = [&](int root) {
    Open& o = open[root];
    if (!o.grads.empty()) inserts.push_back({o.last_at, std::move(o.grads), root});
    o = Open{};
  };
  for (auto& p : ready) {
    if (p.sparse) {  // gathered on every rank, sharded or not
      inserts.push_back({p.at, {p.grad}, -1});
      continue;
    }
    const int root = c.reduce_to_owner ? owner.at(param_of.at(p.grad)) : -1;
    Open& o = open[root];
    if (!o.grads.empty() && p.dtype != o.dtype) flush(root);
    Open& q = open[root];
    q.grads.push_back(p.grad);
    q.dtype = p.dtype;
    q.bytes += p.bytes;
    q.last_at = p.at;
    if (c.overlap && q.bytes >= c.bucket_bytes) flush(root);
  }
  for (auto& [root, o] : open) flush(root);
  if (!c.overlap)  // every bucket after the last gradient
    for (auto& in : inserts) in.after = b.num_ops() - 1;

  std::vector<std::string> all;
  for (auto& p : ready) all.push_back(p.grad);
  using S = ops::CSyncCommStream;
  Operator sync{std::string(S::type)};
  sync.set_input(S::x, all).set_output(S::out, all).set_attr(S::ring_id, c.ring_id);
  sync.set_origin(b.op(seed_at).origin());
  validate_op(sync);
  b.append_op(std::move(sync));
  // From the back, so that the indexes found above stay valid.
  using A = ops::CAllreduceSum;
  using R = ops::CReduceSum;
  std::stable_sort(inserts.begin(), inserts.end(), [](const Insert& x, const Insert& y) { return x.after > y.after; });
  for (auto& in : inserts) {
    Operator op{std::string(in.root < 0 ? A::type : R::type)};
    op.set_input(A::x, in.grads).set_output(A::out, in.grads).set_attr(A::ring_id, c.ring_id).set_attr(A::use_calc_stream, false);
    if (in.root >= 0) op.set_attr(R::root_id, in.root);
    op.set_origin(b.op(in.after).origin());
    validate_op(op);
    b.insert_op(in.after + 1, std::move(op));
  }
  // Each rank's loss is the mean over its own mini-batch: the sum over ranks of (1/nranks) x its gradient is
  // the gradient of the mean over the global batch.
  using Sc = ops::Scale;
  Operator scale{std::string(Sc::type)};
  scale.set_input(Sc::x, {seed}).set_output(Sc::out, {seed}).set_attr(Sc::scale, 1.0f / float(c.nranks));
  scale.set_origin(b.op(seed_at).origin());
  validate_op(scale);
  b.insert_op(seed_at + 1, std::move(scale));
}

OAR_FUNC std::map<std::string, int> deal_out(const Block& b, const std::vector<ParamGrad>& params_grads, int nranks) {
  OAR_CHECK(nranks >= 1, "data parallel: nranks must be >= 1, got {}", nranks);
  std::vector<std::pair<int64_t, size_t>> by_size;
  for (size_t i = 0; i < params_grads.size(); ++i) {
    const Variable& v = b.var(params_grads[i].param);
    by_size.push_back({-std::max<int64_t>(v.shape().numel(), 0) * int64_t(size_of(v.dtype())), i});
  }
  std::stable_sort(by_size.begin(), by_size.end());
  std::vector<int64_t> load(size_t(nranks), 0);
  std::map<std::string, int> owner;
  for (auto& [neg, i] : by_size) {
    const size_t r = size_t(std::min_element(load.begin(), load.end()) - load.begin());
    load[r] -= neg;
    owner[params_grads[i].param] = int(r);
  }
  return owner;
}

OAR_FUNC Program broadcast_program(const std::vector<BroadcastVar>& vars, const Collective& c, int root) {
  Program p;
  Block& b = p.global_block();
  using I = ops::CCommInit;
  Operator init{std::string(I::type)};
  init.set_attr(I::ring_id, c.ring_id).set_attr(I::nranks, c.nranks);
  add_op(b, std::move(init));
  using B = ops::CBroadcast;
  for (auto& v : vars) {
    b.create_var(v.name, {.dtype = v.dtype, .shape = v.shape, .persistable = true});
    Operator op{std::string(B::type)};
    op.set_input(B::x, {v.name}).set_output(B::out, {v.name}).set_attr(B::ring_id, c.ring_id).set_attr(B::root, v.root >= 0 ? v.root : root);
    add_op(b, std::move(op));
  }
  return p;
}

}  // namespace oar::optim
