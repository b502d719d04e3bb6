// oar/dist/context.hpp: data-parallel training across processes and machines. oar moves no bytes and starts
// no processes itself: `mpirun` starts the ranks (on one machine or from a hostfile) and MPI carries the
// tensors (docs/distributed.md). Every rank runs the same program; the collective ops in it say where the
// ranks communicate.
//
//   int main(int argc, char** argv) {
//     oar::dist::Context ctx(argc, argv);                    // a world of 1 without mpirun
//     ...
//     oar::Optimizer opt(model, cost, oar::optim::adam(1e-3), oar::dist::data_parallel(ctx));
//     auto train = oar::io::fashion_mnist_train().shuffle(10000).shard(ctx.rank(), ctx.world_size()).batch(32);
//     opt.train(train, {img, label}, 5);                     // metrics are the mean over the ranks
//     opt.checkpoint("mlp.ckpt");                            // rank 0 writes it
//   }
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "oar/config.hpp"
#include "oar/api/optimizer.hpp"
#include "oar/device/communicator.hpp"

namespace oar::dist {

struct Options {
  /// How long a collective may wait for the other ranks before it fails with an oar::Error naming the rank
  /// it waits for. The environment variable OAR_DIST_TIMEOUT (seconds) overrides it.
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
};

/// The ranks of this job: MPI's world when the process was started by mpirun (MPI is initialized here and
/// finalized by the destructor), a world of one otherwise, so one binary runs both ways. One per process, made
/// first in main: it must outlive every Optimizer that trains over it. Its communicator serves the collective
/// ops of ring 0. Under mpirun it sets oar's thread count to this machine's cores / its ranks on it
/// (oar::set_num_threads afterwards overrides that).
class Context {
 public:
  Context(int& argc, char**& argv, Options options = {});
  explicit Context(Options options = {});
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  ~Context();

  int rank() const { return rank_; }
  int world_size() const { return size_; }
  /// The rank among the ranks on this machine (which GPU to take, say).
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  /// Whether this is rank 0, the rank that prints and writes files.
  bool is_root() const { return rank_ == 0; }
  /// Whether MPI runs (the process was started by mpirun); false for a world of one.
  bool uses_mpi() const { return mpi_; }
  const Options& options() const { return options_; }
  /// The communicator over every rank (ring 0).
  const std::shared_ptr<Communicator>& communicator() const { return comm_; }
  /// The communicator over every rank for tensors on `place`: the one above for the CPU; for cuda(n), NCCL's
  /// on that device, made at the first call (every rank must make it at the same point: an Optimizer on a
  /// GPU model does) and registered as ring 0 of that place. An oar::Error without NCCL or without the device.
  std::shared_ptr<Communicator> communicator(const Place& place) const;
  /// Returns once every rank has called it (oar::Error after the timeout).
  void barrier() const;

 private:
  void start(int* argc, char*** argv);

  Options options_;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
  bool mpi_ = false;
  std::shared_ptr<Communicator> comm_;
  mutable std::mutex devices_mu_;
  mutable std::map<int, std::shared_ptr<Communicator>> devices_;  // NCCL's, by device
};

/// Data-parallel training over the ranks of `ctx`, for `oar::Optimizer(model, loss, rule, data_parallel(ctx))`:
/// parameters broadcast from rank 0 at start; gradients averaged in buckets (DataParallel::bucket_bytes, 25 MB)
/// that travel while the backward pass runs (DataParallel::overlap); identical parameters and optimizer state
/// on every rank; `.sync_batch_norm()` for batch statistics over the global batch. A model on a GPU trains over
/// NCCL (each rank on its own GPU: `oar::cuda(ctx.local_rank())`), MPI carrying NCCL's id and the metrics.
DataParallel data_parallel(const Context& ctx);

}  // namespace oar::dist

#if OAR_HEADER_ONLY
#include "oar/dist/context-inl.hpp"
#endif
