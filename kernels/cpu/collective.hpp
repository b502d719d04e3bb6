// kernels/cpu/collective.hpp: the collective ops on the CPU: each calls the Communicator of its ring_id
// (device/communicator.hpp), from the communicator's own thread, with the buckets and sums of
// kernels/common/collective.hpp, which the CUDA kernels share with NCCL's communicator.
#pragma once
#include "kernels/common/collective.hpp"
#include "oar/ops/collective.hpp"
#include "oar/device/communicator.hpp"
#include "oar/device/kernel_context.hpp"

namespace oar::ops {

inline void CCommInit::eval_cpu(KernelContext& c, const Attrs& a) {
  auto comm = kernels::collective::communicator_of(c, a.ring_id);
  c.check(comm->size() == a.nranks, "the program was made for {} ranks but ring {} has {} ({})", a.nranks, a.ring_id, comm->size(), comm->describe());
}

inline void CBroadcast::eval_cpu(KernelContext& c, const Attrs& a) {
  auto [comm, t] = kernels::collective::broadcast_of(c, a);
  comm->run([&] { comm->broadcast(t->raw(), int64_t(t->bytes()), a.root, a.what); });
}

inline void CAllreduceSum::eval_cpu(KernelContext& c, const Attrs& a) {
  auto comm = kernels::collective::communicator_of(c, a.ring_id);
  kernels::collective::Bucket b = kernels::collective::bucket_of<CAllreduceSum>(c, a);
  if (b.values.empty()) return;
  if (a.use_calc_stream) {
    comm->run([&] { kernels::collective::reduce_bucket(*comm, b); });
  } else {
    comm->queue([comm = comm.get(), b = std::move(b)] { kernels::collective::reduce_bucket(*comm, b); });
  }
}

inline void CReduceSum::eval_cpu(KernelContext& c, const Attrs& a) {
  auto comm = kernels::collective::communicator_of(c, a.ring_id);
  c.check(a.root_id < comm->size(), "root_id {} is not a rank of ring {} ({} ranks)", a.root_id, a.ring_id, comm->size());
  kernels::collective::Bucket b = kernels::collective::bucket_of<CReduceSum>(c, a);
  if (b.values.empty()) return;
  auto job = [comm = comm.get(), b = std::move(b), root = a.root_id] { kernels::collective::reduce_to(*comm, b, root); };
  if (a.use_calc_stream) comm->run(std::move(job));
  else comm->queue(std::move(job));
}

inline void CSyncCommStream::eval_cpu(KernelContext& c, const Attrs& a) { kernels::collective::communicator_of(c, a.ring_id)->wait(); }

}  // namespace oar::ops
