// kernels/cuda/collective.hpp: eval_cuda of c_broadcast, c_allreduce_sum and c_reduce_sum. They call ring_id's communicator
// on the kernel's GPU (NCCL's, kernels/cuda/nccl.cpp), whose thread first waits for a fence recorded here: the
// collective reads what the stream has computed so far, while the stream goes on with the backward pass.
// c_comm_init and c_sync_comm_stream serve every place with their CPU kernels (any_place).
#pragma once
#include "kernels/common/collective.hpp"  // the buckets and the sums of selected rows, shared with the CPU
#include "kernels/cuda/host.hpp"
#include "oar/device/cuda.hpp"

namespace oar::ops {

inline void CBroadcast::eval_cuda(KernelContext& c, const Attrs& a) {
  auto [comm, t] = kernels::collective::broadcast_of(c, a);
  const Fence ready = c.cuda().record_fence();
  comm->run([&] {
    ready.wait();
    comm->broadcast(t->raw(), int64_t(t->bytes()), a.root, a.what);
  });
}

inline void CAllreduceSum::eval_cuda(KernelContext& c, const Attrs& a) {
  auto comm = kernels::collective::communicator_of(c, a.ring_id);
  kernels::collective::Bucket b = kernels::collective::bucket_of<CAllreduceSum>(c, a);
  if (b.values.empty()) return;
  const Fence ready = c.cuda().record_fence();
  auto job = [comm = comm.get(), b = std::move(b), ready] {
    ready.wait();
    kernels::collective::reduce_bucket(*comm, b);
  };
  if (a.use_calc_stream) comm->run(std::move(job));
  else comm->queue(std::move(job));
}

inline void CReduceSum::eval_cuda(KernelContext& c, const Attrs& a) {
  auto comm = kernels::collective::communicator_of(c, a.ring_id);
  c.check(a.root_id < comm->size(), "root_id {} is not a rank of ring {} ({} ranks)", a.root_id, a.ring_id, comm->size());
  kernels::collective::Bucket b = kernels::collective::bucket_of<CReduceSum>(c, a);
  if (b.values.empty()) return;
  const Fence ready = c.cuda().record_fence();
  auto job = [comm = comm.get(), b = std::move(b), ready, root = a.root_id] {
    ready.wait();
    kernels::collective::reduce_to(*comm, b, root);
  };
  if (a.use_calc_stream) comm->run(std::move(job));
  else comm->queue(std::move(job));
}

}  // namespace oar::ops
