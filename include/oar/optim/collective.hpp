// oar/optim/collective.hpp: data-parallel training as program transformations, as Fluid's collective mode
// writes it, so that a saved distributed program shows where the ranks communicate:
// - append_collective: the loss's gradient scaled by 1/nranks (a `scale` after the backward pass's seed), a
//   c_allreduce_sum (or, for ZeRO, a c_reduce_sum to the parameters' owner) after the op that finishes each
//   bucket of gradients (so a bucket travels while the rest of the backward pass runs), and a
//   c_sync_comm_stream at the end that waits for them all;
// - broadcast_program: c_comm_init and one c_broadcast per variable from the root (parameters at start).
// The ops' kernels call the communicator of their ring (device/communicator.hpp); oar::dist makes it.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "oar/autodiff/backward.hpp"
#include "oar/config.hpp"
#include "oar/core/dtype.hpp"
#include "oar/core/shape.hpp"

namespace oar {
class Program;
class Block;
}

namespace oar::optim {

/// How gradients cross the ranks.
struct Collective {
  int nranks = 1;
  int ring_id = 0;
  /// Gradients are summed in buckets of at least this many bytes (the last one may be smaller), each sent as
  /// soon as its last gradient is computed. PyTorch DDP's default is 25 MB too.
  int64_t bucket_bytes = int64_t(25) << 20;
  /// false: every bucket is summed when the backward pass has finished (no overlap; for measuring it).
  bool overlap = true;
  /// Turns the training program's batch_norm ops into sync_batch_norm: statistics over the global batch.
  bool sync_batch_norm = false;
  /// ZeRO stage 1: each dense gradient is summed only into the rank that updates its parameter (deal_out),
  /// with c_reduce_sum in buckets per owner, instead of into every rank with c_allreduce_sum.
  bool reduce_to_owner = false;
};

/// ZeRO's owners: the parameters of `params_grads` (declared in `b`) dealt out largest first, each to the rank
/// with the fewest bytes so far; the same on every rank.
std::map<std::string, int> deal_out(const Block& b, const std::vector<ParamGrad>& params_grads, int nranks);

/// Makes the backward pass of `loss` in `program` (append_backward's, giving `params_grads`) data-parallel
/// over `c.nranks` ranks: each rank's gradients become the mean over the ranks of their mini-batches'.
/// oar::Error when the program has no backward pass of `loss`.
void append_collective(Program& program, const std::string& loss, const std::vector<ParamGrad>& params_grads, const Collective& c);

/// A variable to broadcast: name, dtype and shape (as they are in the scope).
struct BroadcastVar {
  std::string name;
  DType dtype;
  Shape shape;
  int root = -1;  ///< the rank it is copied from (-1: broadcast_program's `root`)
};
/// A program that checks ring `c.ring_id` (c_comm_init) and copies each of `vars` from rank `root` (or its own
/// root) to every rank (c_broadcast, in place), in the order given.
Program broadcast_program(const std::vector<BroadcastVar>& vars, const Collective& c, int root = 0);

}  // namespace oar::optim

#if OAR_HEADER_ONLY
#include "oar/optim/collective-inl.hpp"
#endif
