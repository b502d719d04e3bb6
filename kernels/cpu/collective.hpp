// kernels/cpu/collective.hpp: the collective ops on the CPU: each calls the Communicator of its ring_id
// (device/communicator.hpp), from the communicator's own thread.
#pragma once
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "oar/ops/collective.hpp"
#include "oar/device/communicator.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::ops {

namespace collective_detail {
inline std::shared_ptr<Communicator> communicator_of(const KernelContext& c, int32_t ring_id) {
  std::shared_ptr<Communicator> comm = find_communicator(ring_id);
  c.check(comm != nullptr, "ring {} has no communicator: make an oar::dist::Context (dist/context.hpp) before running a distributed program", ring_id);
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
  thread_local std::vector<char> pack;  // only the communicator's thread packs
  size_t i = 0;
  while (i < b.values.size()) {
    Value* v = b.values[i];
    if (v->is_selected_rows()) {
      SelectedRows& sr = v->selected_rows();
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
      sr.value = std::move(all);
      ++i;
      continue;
    }
    // A run of dense tensors of one dtype: one message.
    LoDTensor& first = v->tensor();
    size_t j = i + 1;
    int64_t count = first.numel();
    while (j < b.values.size() && b.values[j]->is_tensor() && b.values[j]->tensor().dtype() == first.dtype()) count += b.values[j++]->tensor().numel();
    if (j == i + 1) {
      comm.all_reduce_sum(first.raw(), count, first.dtype(), b.what);
    } else {
      const size_t esz = size_of(first.dtype());
      pack.resize(size_t(count) * esz);
      size_t at = 0;
      for (size_t k = i; k < j; ++k) {
        const LoDTensor& t = b.values[k]->tensor();
        std::memcpy(pack.data() + at, t.raw(), t.bytes());
        at += t.bytes();
      }
      comm.all_reduce_sum(pack.data(), count, first.dtype(), b.what);
      at = 0;
      for (size_t k = i; k < j; ++k) {
        LoDTensor& t = b.values[k]->tensor();
        std::memcpy(t.raw(), pack.data() + at, t.bytes());
        at += t.bytes();
      }
    }
    i = j;
  }
}
}  // namespace collective_detail

inline void CCommInit::eval_cpu(KernelContext& c, const Attrs& a) {
  auto comm = collective_detail::communicator_of(c, a.ring_id);
  c.check(comm->size() == a.nranks, "the program was made for {} ranks but ring {} has {} ({})", a.nranks, a.ring_id, comm->size(), comm->describe());
}

inline void CBroadcast::eval_cpu(KernelContext& c, const Attrs& a) {
  auto comm = collective_detail::communicator_of(c, a.ring_id);
  c.check(a.root < comm->size(), "root {} is not a rank of ring {} ({} ranks)", a.root, a.ring_id, comm->size());
  c.check(c.in_value(x) == c.out_value(out), "Out ('{}') must be X ('{}'): the broadcast is in place", c.out_name(out), c.in_name(x));
  LoDTensor& t = c.out(out);
  c.check(t.initialized(), "X ('{}') holds no value to broadcast", c.in_name(x));
  comm->run([&] { comm->broadcast(t.raw(), int64_t(t.bytes()), a.root, a.what); });
}

inline void CAllreduceSum::eval_cpu(KernelContext& c, const Attrs& a) {
  auto comm = collective_detail::communicator_of(c, a.ring_id);
  collective_detail::Bucket b;
  b.names = &a.names;
  size_t bytes = 0;
  for (size_t i = 0; i < c.num_in(x); ++i) {
    Value* v = c.in_value(x, i);
    c.check(v != nullptr && v == c.out_value(out, i), "X[{}] ('{}') must be Out[{}]: the sum is taken in place", i, c.in_name(x, i), i);
    if (v->is_selected_rows()) {
      c.check(!v->selected_rows().value.initialized() || v->selected_rows().value.place().is_cpu(), "'{}' is not on the CPU", c.in_name(x, i));
      bytes += v->selected_rows().value.initialized() ? v->selected_rows().value.bytes() : 0;
    } else {
      const LoDTensor& t = c.in(x, i);
      c.check(t.dtype() == DType::f32 || t.dtype() == DType::f64, "X[{}] ('{}') is {}: the sum is taken over f32 or f64", i, c.in_name(x, i), name(t.dtype()));
      bytes += t.bytes();
    }
    b.values.push_back(v);
  }
  if (b.values.empty()) return;
  b.what = a.what + " (" + std::to_string(bytes) + " bytes)";
  if (a.use_calc_stream) {
    comm->run([&] { collective_detail::reduce_bucket(*comm, b); });
  } else {
    comm->queue([comm = comm.get(), b = std::move(b)] { collective_detail::reduce_bucket(*comm, b); });
  }
}

inline void CSyncCommStream::eval_cpu(KernelContext& c, const Attrs& a) { collective_detail::communicator_of(c, a.ring_id)->wait(); }

}  // namespace oar::ops
