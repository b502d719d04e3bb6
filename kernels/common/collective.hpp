// kernels/common/collective.hpp: what the collective ops' kernels share on every place: the communicator of a
// ring, the checked buckets of c_allreduce_sum and c_reduce_sum, and the sums each runs on the communicator's
// thread (selected rows travel through the host).
#pragma once
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "oar/ops/collective.hpp"
#include "oar/device/communicator.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::kernels::collective {

/// The communicator of ring `ring_id` on the kernel's place; an oar::Error saying how to make one when there is none.
inline std::shared_ptr<Communicator> communicator_of(const KernelContext& c, int32_t ring_id) {
  std::shared_ptr<Communicator> comm = find_communicator(ring_id, c.place());
  if (c.place().is_cpu())
    c.check(comm != nullptr, "ring {} has no communicator: make an oar::dist::Context (dist/context.hpp) before running a distributed program", ring_id);
  else
    c.check(comm != nullptr, "ring {} has no communicator on {}: a data-parallel Optimizer on a GPU makes NCCL's (oar::dist::data_parallel)", ring_id,
            c.place().str());
  return comm;
}

/// What one c_allreduce_sum sums: the values of its X, resolved at the kernel (the job runs later, before the
/// run's c_sync_comm_stream, while the prepared op and its `names` live).
struct Bucket {
  std::vector<Value*> values;
  const std::vector<std::string>* names;
  std::string what;
};

/// Sums the bucket over the ranks: the dense tensors of one dtype packed into one message (alone: in place);
/// selected rows joined over the ranks. Runs on the communicator's thread.
inline void reduce_bucket(Communicator& comm, const Bucket& b) {
  size_t i = 0;
  while (i < b.values.size()) {
    Value* v = b.values[i];
    if (v->is_selected_rows()) {
      SelectedRows& sr = v->selected_rows();
      // Rows on a GPU travel through the host: the gather is host memory on every communicator.
      const Place where = sr.value.initialized() ? sr.value.place() : cpu();
      if (!where.is_cpu()) sr.value = sr.value.to(cpu());
      const int64_t width = sr.rows.empty() ? 0 : sr.value.numel() / int64_t(sr.rows.size());
      const std::string& name = (*b.names)[i];
      std::vector<int64_t> sizes;
      std::vector<char> w = comm.all_gather(&width, sizeof width, sizes, b.what + " (row width)");
      std::vector<char> rows = comm.all_gather(sr.rows.data(), int64_t(sr.rows.size() * sizeof(int64_t)), sizes, b.what + " (rows of '" + name + "')");
      std::vector<char> vals = comm.all_gather(sr.value.initialized() ? sr.value.raw() : nullptr, int64_t(sr.value.initialized() ? sr.value.bytes() : 0), sizes,
                                               b.what + " (row values of '" + name + "')");
      int64_t d = 0;  // every rank's row width; a rank without rows sends 0
      for (size_t r = 0; r < w.size() / sizeof(int64_t); ++r) {
        int64_t x;
        std::memcpy(&x, w.data() + r * sizeof x, sizeof x);
        if (x) {
          if (d && x != d) throw Error(fmt::format("{}: '{}' has rows of {} values on one rank and {} on another", b.what, name, d, x));
          d = x;
        }
      }
      const int64_t n = int64_t(rows.size() / sizeof(int64_t));
      sr.rows.resize(size_t(n));
      if (n) std::memcpy(sr.rows.data(), rows.data(), rows.size());
      Shape s = sr.value.initialized() ? sr.value.shape() : Shape{0, d};
      s[0] = n;
      const DType dt = sr.value.initialized() ? sr.value.dtype() : DType::f32;
      Tensor all(s, dt, cpu());
      if (!vals.empty()) std::memcpy(all.raw(), vals.data(), vals.size());
      sr.value = where.is_cpu() ? std::move(all) : all.to(where);
      ++i;
      continue;
    }
    // A run of dense tensors of one dtype: one message.
    const DType dt = v->tensor().dtype();
    std::vector<void*> parts;
    std::vector<int64_t> counts;
    size_t j = i;
    for (; j < b.values.size() && b.values[j]->is_tensor() && b.values[j]->tensor().dtype() == dt; ++j) {
      parts.push_back(b.values[j]->tensor().raw());
      counts.push_back(b.values[j]->tensor().numel());
    }
    comm.all_reduce_sum(parts, counts, dt, b.what);
    i = j;
  }
}

/// c_broadcast's communicator and tensor, checked: the root is a rank, the broadcast is in place, X has a value.
inline std::pair<std::shared_ptr<Communicator>, LoDTensor*> broadcast_of(KernelContext& c, const ops::CBroadcast::Attrs& a) {
  using Op = ops::CBroadcast;
  auto comm = communicator_of(c, a.ring_id);
  c.check(a.root < comm->size(), "root {} is not a rank of ring {} ({} ranks)", a.root, a.ring_id, comm->size());
  c.check(c.in_value(Op::x) == c.out_value(Op::out), "Out ('{}') must be X ('{}'): the broadcast is in place", c.out_name(Op::out), c.in_name(Op::x));
  LoDTensor& t = c.out(Op::out);
  c.check(t.initialized(), "X ('{}') holds no value to broadcast", c.in_name(Op::x));
  return {std::move(comm), &t};
}

/// Sums the bucket's dense tensors into rank `root` (one message per run of one dtype). Runs on the
/// communicator's thread.
inline void reduce_to(Communicator& comm, const Bucket& b, int root) {
  size_t i = 0;
  while (i < b.values.size()) {
    const DType dt = b.values[i]->tensor().dtype();
    std::vector<void*> parts;
    std::vector<int64_t> counts;
    for (; i < b.values.size() && b.values[i]->tensor().dtype() == dt; ++i) {
      parts.push_back(b.values[i]->tensor().raw());
      counts.push_back(b.values[i]->tensor().numel());
    }
    comm.reduce_sum(parts, counts, dt, root, b.what);
  }
}

/// The bucket of one c_allreduce_sum or c_reduce_sum call: its X, checked to be summable in place on the
/// kernel's place (selected rows: c_allreduce_sum only).
template <class Op>
Bucket bucket_of(KernelContext& c, const typename Op::Attrs& a) {
  Bucket b;
  b.names = &a.names;
  size_t bytes = 0;
  for (size_t i = 0; i < c.num_in(Op::x); ++i) {
    Value* v = c.in_value(Op::x, i);
    c.check(v != nullptr && v == c.out_value(Op::out, i), "X[{}] ('{}') must be Out[{}]: the sum is taken in place", i, c.in_name(Op::x, i), i);
    if (v->is_selected_rows()) {
      c.check(Op::type == ops::CAllreduceSum::type, "X[{}] ('{}') holds selected rows, which {} does not sum (c_allreduce_sum gathers them)", i,
              c.in_name(Op::x, i), Op::type);
      const Tensor& t = v->selected_rows().value;
      c.check(!t.initialized() || t.place() == c.place(), "'{}' is on {}, not on the kernel's {}", c.in_name(Op::x, i), t.place().str(), c.place().str());
      bytes += t.initialized() ? t.bytes() : 0;
    } else {
      const LoDTensor& t = c.in(Op::x, i);
      c.check(t.dtype() == DType::f32 || t.dtype() == DType::f64, "X[{}] ('{}') is {}: the sum is taken over f32 or f64", i, c.in_name(Op::x, i),
              name(t.dtype()));
      bytes += t.bytes();
    }
    b.values.push_back(v);
  }
  b.what = a.what + " (" + std::to_string(bytes) + " bytes)";
  return b;
}

}  // namespace oar::kernels::collective
