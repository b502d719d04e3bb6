// oar/device/communicator.hpp: Communicator, a group of processes (ranks) that sum and exchange tensors,
// which the collective ops (ops/collective.hpp) call, found by the ops' `ring_id`. oar::dist::Context makes
// one over MPI (dist/context.hpp). Each communicator talks to the other ranks from one thread of its own, so a
// collective queued by a kernel runs while the backward pass goes on (the overlap of data-parallel training).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "oar/config.hpp"
#include "oar/core/dtype.hpp"
#include "oar/core/place.hpp"

namespace oar {

/// Every rank must make the same collective calls in the same order; their results are the same bits on
/// every rank. A call that cannot complete (a rank died or hangs past the timeout) is an oar::Error naming the
/// rank and the call, and the communicator stays failed: every later call raises the same error.
class Communicator {
 public:
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  /// Derived classes call stop() first, so that no queued job runs on a half-destroyed object.
  virtual ~Communicator();

  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "MPI, rank 1 of 3": for messages.
  virtual std::string describe() const = 0;
  /// Where the memory of all_reduce_sum and broadcast lives: the host for MPI's communicator, one GPU for
  /// NCCL's. all_gather always takes and returns host memory.
  virtual Place place() const { return cpu(); }

  /// Sums `count` elements of `dtype` at `data` over the ranks, in place. `what` names the call in errors.
  virtual void all_reduce_sum(void* data, int64_t count, DType dtype, const std::string& what) = 0;
  /// Sums `parts.size()` buffers (part i: `counts[i]` elements of `dtype`) over the ranks, in place, as one
  /// message: a gradient bucket. This one packs them into a host buffer around all_reduce_sum; a GPU
  /// communicator packs them in device memory.
  virtual void all_reduce_sum(const std::vector<void*>& parts, const std::vector<int64_t>& counts, DType dtype, const std::string& what);
  /// Sums `count` elements of `dtype` at `data` over the ranks into rank `root`'s `data`; the other ranks'
  /// `data` stay as they were. ZeRO's gradients: only the rank that updates a parameter needs their sum.
  virtual void reduce_sum(void* data, int64_t count, DType dtype, int root, const std::string& what) = 0;
  /// The same for a bucket of `parts` (as all_reduce_sum above), packed into one message.
  virtual void reduce_sum(const std::vector<void*>& parts, const std::vector<int64_t>& counts, DType dtype, int root, const std::string& what);
  /// Copies `bytes` at `data` on rank `root` to every other rank's `data`.
  virtual void broadcast(void* data, int64_t bytes, int root, const std::string& what) = 0;
  /// Every rank's `bytes` at `data` (host memory), joined in rank order; `sizes` receives each rank's byte count.
  virtual std::vector<char> all_gather(const void* data, int64_t bytes, std::vector<int64_t>& sizes, const std::string& what) = 0;

  /// Runs `job` (which makes collective calls) on this communicator's thread after every job queued before
  /// it, without waiting for it.
  void queue(std::function<void()> job);
  /// Waits until every queued job has run; rethrows the error of a job that failed.
  void wait();
  /// Queues `job` and waits for it.
  void run(std::function<void()> job);
  /// Whether a call has failed (the other ranks cannot be relied on any more).
  bool failed() const;
  /// Time spent in queued or run collectives, and time callers spent in wait() / run() for them: what the
  /// backward pass did not hide (oar_bench dist reports both).
  struct Stats {
    double busy_seconds = 0;
    double waited_seconds = 0;
  };
  Stats stats() const;
  void reset_stats();
  /// Whether the caller runs on this communicator's thread (where collective calls belong).
  bool on_own_thread() const { return worker_id_.load() == std::this_thread::get_id(); }

 protected:
  /// Runs what is queued, then ends the thread. Called by derived destructors.
  void stop();
  /// The dtypes a sum takes (f32, f64); another is an oar::Error naming the call `what` and the sum `op`.
  static void check_sum_dtype(DType dtype, const char* op, const std::string& what);

 private:
  void work();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  size_t running_ = 0;  // jobs taken but not finished
  bool stop_ = false;
  std::exception_ptr error_;
  Stats stats_;
  std::thread thread_;
  std::atomic<std::thread::id> worker_id_{};
};

/// Makes `c` the communicator of the collective ops whose ring_id is `ring_id` and that run on `c->place()`.
void set_communicator(int ring_id, std::shared_ptr<Communicator> c);
/// Removes ring `ring_id`'s communicators, on every place.
void remove_communicators(int ring_id);
/// The communicator of `ring_id` on `place` (the collective ops of a GPU program find NCCL's), or nullptr.
std::shared_ptr<Communicator> find_communicator(int ring_id, const Place& place = cpu());

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/device/communicator-inl.hpp"
#endif
