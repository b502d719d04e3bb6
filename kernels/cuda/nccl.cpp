// kernels/cuda/nccl.cpp: NCCL's communicator, the GPU counterpart of MPI's (dist/context-inl.hpp): the
// collective ops of a program on cuda(n) call it (kernels/cuda/collective.hpp). One per device and job, made
// by oar::dist::Context over its MPI world, which carries NCCL's id from rank 0 and stays the control path:
// every collective is first announced over MPI, so a rank that died or runs another collective is named as MPI's
// communicator names it, before any GPU waits. Plain C++ on the CUDA runtime and NCCL, compiled by the host
// compiler. Built with NCCL when CMake finds libnccl beside the toolkit (OAR_WITH_NCCL); without it, asking
// for one is an oar::Error.
#include <cuda_runtime.h>
#if OAR_WITH_NCCL
#include <nccl.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "oar/device/communicator.hpp"
#include "oar/device/cuda.hpp"

namespace oar {

#if OAR_WITH_NCCL
namespace {

using Clock = std::chrono::steady_clock;

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(int device, std::shared_ptr<Communicator> control, std::chrono::milliseconds timeout)
      : device_(device), control_(std::move(control)), timeout_(timeout), rank_(control_->rank()), size_(control_->size()) {
    ncclUniqueId id;
    std::memset(&id, 0, sizeof id);
    if (rank_ == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId", "making NCCL's communicator");
    control_->broadcast(&id, int64_t(sizeof id), 0, "NCCL's communicator id, from rank 0");
    try {
      run([&] {
        cuda_call(cudaSetDevice(device_), "cudaSetDevice");
        // Non-blocking: NCCL's own stream never waits for the stream computing the next gradients, and the
        // legacy stream's copies (Tensor::to) never wait for NCCL's.
        cuda_call(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
        cuda_call(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 0;  // every call returns at once; settle() polls it against the deadline
        const auto deadline = Clock::now() + timeout_;
        call(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config), "ncclCommInitRankConfig", "making NCCL's communicator", deadline);
      });
    } catch (...) {
      release();
      throw;
    }
  }
  ~NcclCommunicator() override {
    stop();
    release();
  }

  using Communicator::all_reduce_sum;
  using Communicator::reduce_sum;
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Place place() const override { return cuda(device_); }
  std::string describe() const override { return fmt::format("NCCL on cuda:{}, rank {} of {}", device_, rank_, size_); }

  void all_reduce_sum(void* data, int64_t count, DType dtype, const std::string& what) override {
    all_reduce_sum(std::vector<void*>{data}, std::vector<int64_t>{count}, dtype, what);
  }

  /// The parts are packed into one device buffer padded to a multiple of the ranks, reduce-scattered (each
  /// element summed by one rank) and all-gathered (the sums copied unchanged): every rank holds the same bits,
  /// whichever algorithm NCCL picks for each half.
  void all_reduce_sum(const std::vector<void*>& parts, const std::vector<int64_t>& counts, DType dtype, const std::string& what) override {
    if (!on_own_thread()) return run([&] { all_reduce_sum(parts, counts, dtype, what); });
    const Sum sum = begin_sum(kAllReduce, "all-reduce", counts, dtype, what);
    if (sum.count == 0) return;
    const int64_t chunk = (sum.count + size_ - 1) / size_;
    char* buf = pack(parts, counts, sum.esz, size_t(chunk * size_) * sum.esz);
    char* mine = buf + size_t(rank_ * chunk) * sum.esz;
    call(ncclReduceScatter(buf, mine, size_t(chunk), sum.type, ncclSum, comm_, stream_), "ncclReduceScatter", what, sum.deadline);
    call(ncclAllGather(mine, buf, size_t(chunk), sum.type, comm_, stream_), "ncclAllGather", what, sum.deadline);
    unpack(parts, counts, sum.esz, buf);
    finish(what, sum.deadline);
  }

  void reduce_sum(void* data, int64_t count, DType dtype, int root, const std::string& what) override {
    reduce_sum(std::vector<void*>{data}, std::vector<int64_t>{count}, dtype, root, what);
  }

  /// Packed as above, then ncclReduce into the root's buffer; only the root unpacks.
  void reduce_sum(const std::vector<void*>& parts, const std::vector<int64_t>& counts, DType dtype, int root, const std::string& what) override {
    if (!on_own_thread()) return run([&] { reduce_sum(parts, counts, dtype, root, what); });
    OAR_CHECK(root >= 0 && root < size_, "{}: root {} is not a rank ({} ranks)", what, root, size_);
    const Sum sum = begin_sum(kReduce, "reduce", counts, dtype, what);
    if (sum.count == 0) return;
    char* buf = pack(parts, counts, sum.esz, size_t(sum.count) * sum.esz);
    call(ncclReduce(buf, buf, size_t(sum.count), sum.type, ncclSum, root, comm_, stream_), "ncclReduce", what, sum.deadline);
    if (rank_ == root) unpack(parts, counts, sum.esz, buf);
    finish(what, sum.deadline);
  }

  void broadcast(void* data, int64_t bytes, int root, const std::string& what) override {
    if (!on_own_thread()) return run([&] { broadcast(data, bytes, root, what); });
    if (bytes == 0) return;
    announce(kBroadcast, bytes, what);
    const auto deadline = Clock::now() + timeout_;
    call(ncclBroadcast(data, data, size_t(bytes), ncclUint8, root, comm_, stream_), "ncclBroadcast", what, deadline);
    finish(what, deadline);
  }

  /// Host memory: gathered over MPI (a sparse gradient's rows, the few bytes of a check).
  std::vector<char> all_gather(const void* data, int64_t bytes, std::vector<int64_t>& sizes, const std::string& what) override {
    return control_->all_gather(data, bytes, sizes, what);
  }

 private:
  enum Kind : int64_t { kAllReduce = 1, kBroadcast = 2, kReduce = 4 };

  /// A sum's elements (over every part), their size and NCCL type, and its deadline.
  struct Sum {
    int64_t count = 0;
    size_t esz = 0;
    ncclDataType_t type = ncclFloat32;
    Clock::time_point deadline;
  };
  /// What a sum of `counts` elements of `dtype` starts with: the dtype checked, the count, and (unless it is 0)
  /// the call announced to the other ranks.
  Sum begin_sum(Kind kind, const char* op, const std::vector<int64_t>& counts, DType dtype, const std::string& what) {
    check_sum_dtype(dtype, op, what);
    Sum s;
    for (int64_t n : counts) s.count += n;
    s.esz = size_of(dtype);
    s.type = dtype == DType::f32 ? ncclFloat32 : ncclFloat64;
    if (s.count == 0) return s;
    announce(kind, s.count * int64_t(s.esz), what);
    s.deadline = Clock::now() + timeout_;
    return s;
  }

  /// The parts copied one after another into the scratch buffer of `bytes` (on NCCL's stream), zeros after them.
  char* pack(const std::vector<void*>& parts, const std::vector<int64_t>& counts, size_t esz, size_t bytes) {
    char* buf = scratch(bytes);
    size_t at = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      const size_t b = size_t(counts[k]) * esz;
      if (b) cuda_call(cudaMemcpyAsync(buf + at, parts[k], b, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
      at += b;
    }
    if (bytes > at) cuda_call(cudaMemsetAsync(buf + at, 0, bytes - at, stream_), "cudaMemsetAsync");
    return buf;
  }
  void unpack(const std::vector<void*>& parts, const std::vector<int64_t>& counts, size_t esz, const char* buf) {
    size_t at = 0;
    for (size_t k = 0; k < parts.size(); ++k) {
      const size_t b = size_t(counts[k]) * esz;
      if (b) cuda_call(cudaMemcpyAsync(parts[k], buf + at, b, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
      at += b;
    }
  }

  /// Every rank tells the others, over MPI, which collective it is about to run (sequence number, kind,
  /// bytes). A rank that never reaches it is named by MPI's timeout, a rank that runs another one at once.
  void announce(Kind kind, int64_t bytes, const std::string& what) {
    const int64_t mine[3] = {++seq_, kind, bytes};
    std::vector<int64_t> sizes;
    const std::vector<char> all = control_->all_gather(mine, int64_t(sizeof mine), sizes, what + " (announced over MPI)");
    for (int k = 0; k < size_; ++k) {
      int64_t t[3];
      std::memcpy(t, all.data() + size_t(k) * sizeof t, sizeof t);
      if (t[0] != mine[0] || t[1] != mine[1] || t[2] != mine[2])
        throw Error(fmt::format("{}: NCCL collective #{} differs between the ranks: this rank ({} of {}) runs {} where rank {} runs {} (its #{}); "
                                "every rank must make the same collective calls in the same order",
                                what, mine[0], rank_, size_, name_of(mine), k, name_of(t), t[0]));
    }
  }
  static std::string name_of(const int64_t* a) {
    const char* k = a[1] == kAllReduce ? "an all-reduce" : a[1] == kBroadcast ? "a broadcast" : a[1] == kReduce ? "a reduce" : "an unknown collective";
    return fmt::format("{} of {} bytes", k, a[2]);
  }

  /// Device scratch of at least `bytes`; the previous collective has finished, so it may be replaced.
  char* scratch(size_t bytes) {
    if (bytes > scratch_bytes_) {
      if (scratch_) cuda_call(cudaFree(scratch_), "cudaFree");
      scratch_ = nullptr;
      scratch_bytes_ = 0;
      cuda_call(cudaMalloc(&scratch_, bytes), "cudaMalloc (NCCL's bucket buffer)");
      scratch_bytes_ = bytes;
    }
    return static_cast<char*>(scratch_);
  }

  /// Waits until what was queued on NCCL's stream has run, polling against `deadline`: past it the
  /// communicator is aborted (every rank reached the collective, so a GPU or a link hangs).
  void finish(const std::string& what, Clock::time_point deadline) {
    cuda_call(cudaEventRecord(done_, stream_), "cudaEventRecord");
    for (int polls = 0;; ++polls) {
      const cudaError_t q = cudaEventQuery(done_);
      if (q == cudaSuccess) return;
      if (q != cudaErrorNotReady) cuda_call(q, "the collective on the device");
      ncclResult_t s = ncclSuccess;
      ncclCommGetAsyncError(comm_, &s);
      if (s != ncclSuccess && s != ncclInProgress) fail(s, "the collective", what);
      if (Clock::now() > deadline) timed_out(what);
      pause(polls);
    }
  }

  /// A call of the non-blocking communicator: ncclInProgress is polled until it settles.
  void call(ncclResult_t r, const char* fn, const std::string& what, Clock::time_point deadline) {
    if (r != ncclSuccess && r != ncclInProgress) fail(r, fn, what);
    for (int polls = 0;; ++polls) {
      ncclResult_t s = ncclSuccess;
      if (comm_) ncclCommGetAsyncError(comm_, &s);
      if (s == ncclSuccess) return;
      if (s != ncclInProgress) fail(s, fn, what);
      if (Clock::now() > deadline) timed_out(what);
      pause(polls);
    }
  }

  static void pause(int polls) {
    if (polls < 200) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(polls < 1200 ? 10 : 200));
  }

  [[noreturn]] void timed_out(const std::string& what) {
    abort_comm();
    throw Error(fmt::format("{}: NCCL did not finish within {:g} s on cuda:{} (this is rank {} of {}; every rank announced it, so a GPU or the "
                            "link between them hangs), and the job cannot go on",
                            what, double(timeout_.count()) / 1000.0, device_, rank_, size_));
  }
  [[noreturn]] void fail(ncclResult_t r, const char* fn, const std::string& what) {
    const std::string detail = comm_ ? ncclGetLastError(comm_) : "";
    abort_comm();
    throw Error(fmt::format("{}: {} failed on cuda:{} (rank {} of {}): NCCL says: {}{}{}", what, fn, device_, rank_, size_, ncclGetErrorString(r),
                            detail.empty() ? "" : ": ", detail));
  }
  void check(ncclResult_t r, const char* fn, const std::string& what) {
    if (r != ncclSuccess) fail(r, fn, what);
  }
  void cuda_call(cudaError_t e, const char* fn) {
    if (e == cudaSuccess) return;
    cudaGetLastError();
    abort_comm();
    throw Error(fmt::format("NCCL's communicator on cuda:{} (rank {} of {}): {} failed: {}", device_, rank_, size_, fn, cudaGetErrorString(e)));
  }

  void abort_comm() {
    if (comm_) ncclCommAbort(comm_);
    comm_ = nullptr;
  }

  void release() {
    int previous = -1;
    cudaGetDevice(&previous);
    cudaSetDevice(device_);
    if (comm_) {
      // A clean end: finish what NCCL holds (bounded), then destroy; abort when it does not settle.
      ncclResult_t r = ncclCommFinalize(comm_);
      const auto deadline = Clock::now() + std::min(timeout_, std::chrono::milliseconds(10000));
      ncclResult_t s = r;
      while (r == ncclSuccess || r == ncclInProgress) {
        ncclCommGetAsyncError(comm_, &s);
        if (s != ncclInProgress || Clock::now() > deadline) break;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
      if (s == ncclSuccess) ncclCommDestroy(comm_);
      else ncclCommAbort(comm_);
      comm_ = nullptr;
    }
    if (scratch_) cudaFree(scratch_);
    if (done_) cudaEventDestroy(done_);
    if (stream_) cudaStreamDestroy(stream_);
    scratch_ = nullptr;
    done_ = nullptr;
    stream_ = nullptr;
    if (previous >= 0) cudaSetDevice(previous);
  }

  int device_;
  std::shared_ptr<Communicator> control_;
  std::chrono::milliseconds timeout_;
  int rank_, size_;
  int64_t seq_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
};

}  // namespace

std::shared_ptr<Communicator> make_nccl_communicator(int device, std::shared_ptr<Communicator> control, std::chrono::milliseconds timeout) {
  OAR_CHECK(control != nullptr, "NCCL's communicator needs MPI's (or a world of one) to carry its id");
  const int n = cuda_device_count();
  OAR_CHECK(device >= 0 && device < n, "NCCL's communicator: no CUDA device {} on this machine ({} found)", device, n);
  return std::make_shared<NcclCommunicator>(device, std::move(control), timeout);
}

#else

std::shared_ptr<Communicator> make_nccl_communicator(int device, std::shared_ptr<Communicator>, std::chrono::milliseconds) {
  throw Error(fmt::format("data parallel on cuda:{} needs NCCL, and this oar was built without it (CMake found no libnccl beside the CUDA toolkit)",
                          device));
}

#endif

}  // namespace oar
