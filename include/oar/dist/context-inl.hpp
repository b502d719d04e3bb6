// oar/dist/context-inl.hpp: the implementation of context.hpp (included by it when header-only; compiled once into liboar otherwise).
// MPI appears only here (and only with OAR_WITH_MPI): a model unit never parses mpi.h.
#pragma once
#include "oar/dist/context.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "oar/core/error.hpp"
#include "oar/device/cuda.hpp"
#include "oar/device/thread_pool.hpp"

#if OAR_WITH_MPI
#include <mpi.h>
#endif
#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace oar::dist {

namespace detail {

/// A world of one: every collective is the identity.
class SoloCommunicator final : public Communicator {
 public:
  ~SoloCommunicator() override { stop(); }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "a world of one process (not started by mpirun)"; }
  using Communicator::all_reduce_sum;
  using Communicator::reduce_sum;
  void all_reduce_sum(void*, int64_t, DType, const std::string&) override {}
  void reduce_sum(void*, int64_t, DType, int, const std::string&) override {}
  void broadcast(void*, int64_t, int, const std::string&) override {}
  std::vector<char> all_gather(const void* data, int64_t bytes, std::vector<int64_t>& sizes, const std::string&) override {
    sizes = {bytes};
    const char* p = static_cast<const char*>(data);
    return bytes ? std::vector<char>(p, p + bytes) : std::vector<char>();
  }
};

inline bool started_by_mpirun() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

inline std::chrono::milliseconds timeout_from_env(std::chrono::milliseconds dflt) {
  const char* v = std::getenv("OAR_DIST_TIMEOUT");
  if (!v || !*v) return dflt;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end || !(s > 0)) throw Error(fmt::format("OAR_DIST_TIMEOUT must be a positive number of seconds, got '{}'", v));
  return std::chrono::milliseconds(int64_t(s * 1000));
}

inline std::string seconds(std::chrono::milliseconds t) { return fmt::format("{:g} s", double(t.count()) / 1000.0); }

#if OAR_WITH_MPI
/// MPI's world. Every MPI call after MPI_Init runs on the communicator's own thread (public calls from
/// elsewhere are run there), so MPI_THREAD_SERIALIZED is enough. Calls poll non-blocking requests against a
/// deadline, so a dead or stopped rank is an error, not a hang.
class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(std::chrono::milliseconds timeout) : timeout_(timeout) {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
#if defined(__linux__)
    // The thread's short sleeps between polls: 1 us of timer slack instead of Linux's default 50 us.
    run([] { ::prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0); });
#endif
  }
  ~MpiCommunicator() override {
    stop();
    int finalized = 0;
    MPI_Finalized(&finalized);  // an Optimizer may hold the communicator past the Context
    if (!finalized && !failed()) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return fmt::format("MPI, rank {} of {}", rank_, size_); }
  using Communicator::all_reduce_sum;
  using Communicator::reduce_sum;

  /// Ring reduce-scatter, then ring all-gather: each element is summed by one rank in a fixed order and then
  /// copied to the others, so every rank holds the same bits (MPI_Allreduce does not promise that), and each
  /// rank sends 2 (N - 1) / N of the data, as a bandwidth-optimal all-reduce does.
  void all_reduce_sum(void* data, int64_t count, DType dtype, const std::string& what) override {
    if (!on_own_thread()) return run([&] { all_reduce_sum(data, count, dtype, what); });
    if (size_ == 1 || count == 0) return;
    check_sum_dtype(dtype, "all-reduce", what);
    const int64_t esz = int64_t(size_of(dtype));
    // Each message is one chunk; chunks stay below 2^30 bytes for MPI's int counts.
    const int64_t piece = std::max<int64_t>(1, (int64_t(1) << 30) / esz) * size_;
    for (int64_t at = 0; at < count; at += piece) ring_all_reduce(static_cast<char*>(data) + at * esz, std::min(piece, count - at), dtype, what);
  }

  /// A chain that ends at the root: rank root + 1 sends its values to root + 2, which adds its own and sends
  /// the sum on, and so on round to the root, which adds its own last. Each element is summed in the same order
  /// whatever the algorithm, and each rank but the root sends the bucket once: (N - 1) / N of the bytes an
  /// all-reduce sends per rank twice over.
  void reduce_sum(void* data, int64_t count, DType dtype, int root, const std::string& what) override {
    if (!on_own_thread()) return run([&] { reduce_sum(data, count, dtype, root, what); });
    if (size_ == 1 || count == 0) return;
    check_sum_dtype(dtype, "reduce", what);
    OAR_CHECK(root >= 0 && root < size_, "{}: root {} is not a rank ({} ranks)", what, root, size_);
    const int64_t esz = int64_t(size_of(dtype));
    const int64_t piece = std::max<int64_t>(1, (int64_t(1) << 30) / esz);
    const int first = (root + 1) % size_, left = (rank_ + size_ - 1) % size_, right = (rank_ + 1) % size_;
    thread_local std::vector<char> partial;
    Arrival arrival(*this, kReduce, count * esz);
    for (int64_t at = 0; at < count; at += piece) {
      const int64_t n = std::min(piece, count - at);
      char* mine = static_cast<char*>(data) + at * esz;
      if (rank_ == first) {  // the chain starts with this rank's own values
        MPI_Request r;
        check(MPI_Isend(mine, int(n * esz), MPI_BYTE, right, kDataTag, comm_, &r), what);
        wait({r}, {right}, what, arrival);
        continue;
      }
      partial.resize(size_t(n * esz));
      MPI_Request r;
      check(MPI_Irecv(partial.data(), int(n * esz), MPI_BYTE, left, kDataTag, comm_, &r), what);
      wait({r}, {left}, what, arrival);
      if (rank_ == root) {  // the sum of every rank's, this rank's added last
        if (dtype == DType::f32) add(reinterpret_cast<float*>(mine), reinterpret_cast<const float*>(partial.data()), n);
        else add(reinterpret_cast<double*>(mine), reinterpret_cast<const double*>(partial.data()), n);
        continue;
      }
      if (dtype == DType::f32) add(reinterpret_cast<float*>(partial.data()), reinterpret_cast<const float*>(mine), n);
      else add(reinterpret_cast<double*>(partial.data()), reinterpret_cast<const double*>(mine), n);
      check(MPI_Isend(partial.data(), int(n * esz), MPI_BYTE, right, kDataTag, comm_, &r), what);
      wait({r}, {right}, what, arrival);
    }
    arrival.finish(*this, what);
  }

  void broadcast(void* data, int64_t bytes, int root, const std::string& what) override {
    if (!on_own_thread()) return run([&] { broadcast(data, bytes, root, what); });
    if (size_ == 1 || bytes == 0) return;
    OAR_CHECK(bytes < (int64_t(1) << 31), "{}: {} bytes is more than one broadcast carries", what, bytes);
    Arrival arrival(*this, kBroadcast, bytes);
    MPI_Request r;
    check(MPI_Ibcast(data, int(bytes), MPI_BYTE, root, comm_, &r), what);
    wait({r}, {root}, what, arrival);
    arrival.finish(*this, what);
  }

  std::vector<char> all_gather(const void* data, int64_t bytes, std::vector<int64_t>& sizes, const std::string& what) override {
    if (!on_own_thread()) {
      std::vector<char> out;
      run([&] { out = all_gather(data, bytes, sizes, what); });
      return out;
    }
    OAR_CHECK(bytes < (int64_t(1) << 31), "{}: {} bytes is more than one all-gather carries", what, bytes);
    Arrival arrival(*this, kAllGather, -1);
    std::vector<int> counts(size_t(size_), 0);
    int mine = int(bytes);
    MPI_Request r;
    std::vector<int> everyone;
    for (int k = 0; k < size_; ++k)
      if (k != rank_) everyone.push_back(k);
    check(MPI_Iallgather(&mine, 1, MPI_INT, counts.data(), 1, MPI_INT, comm_, &r), what);
    wait({r}, everyone, what, arrival);
    std::vector<int> displs(size_t(size_), 0);
    int64_t total = 0;
    sizes.assign(size_t(size_), 0);
    for (int k = 0; k < size_; ++k) {
      OAR_CHECK(total + counts[size_t(k)] < (int64_t(1) << 31), "{}: more than 2 GiB gathered", what);
      displs[size_t(k)] = int(total);
      sizes[size_t(k)] = counts[size_t(k)];
      total += counts[size_t(k)];
    }
    std::vector<char> out(static_cast<size_t>(total));
    check(MPI_Iallgatherv(data, mine, MPI_BYTE, out.data(), counts.data(), displs.data(), MPI_BYTE, comm_, &r), what);
    wait({r}, everyone, what, arrival);
    arrival.finish(*this, what);
    return out;
  }

 private:
  static constexpr int kArriveTag = 7001, kDataTag = 7002;

  /// Each collective starts by telling every other rank its sequence number, kind and size (a few bytes).
  /// When a collective times out, the ranks whose message has not come are the ones that never reached it:
  /// the dead or stopped rank, not a neighbour that waits for it too. When the messages disagree, the ranks'
  /// programs do (one sums while another gathers): that is an error at once, not a hang.
  enum Kind : int64_t { kAllReduce = 1, kBroadcast = 2, kAllGather = 3, kReduce = 4 };
  struct Arrival {
    int64_t mine[3];
    std::vector<int64_t> from;      // 3 per rank
    std::vector<MPI_Request> reqs;  // sends, then receives
    std::vector<int> peers;         // the rank of each request
    bool compared = false;
    /// `bytes` -1: the size may differ between ranks (a gather).
    Arrival(MpiCommunicator& c, Kind kind, int64_t bytes) : mine{++c.seq_, kind, bytes}, from(size_t(3 * c.size_), -1) {
      for (int k = 0; k < c.size_; ++k) {
        if (k == c.rank_) continue;
        MPI_Request r;
        c.check(MPI_Isend(mine, 3, MPI_INT64_T, k, kArriveTag, c.comm_, &r), "announcing a collective");
        reqs.push_back(r);
        peers.push_back(k);
      }
      for (int k = 0; k < c.size_; ++k) {
        if (k == c.rank_) continue;
        MPI_Request r;
        c.check(MPI_Irecv(&from[size_t(3 * k)], 3, MPI_INT64_T, k, kArriveTag, c.comm_, &r), "announcing a collective");
        reqs.push_back(r);
        peers.push_back(k);
      }
    }
    /// The ranks that have not announced this collective (the receives still open).
    std::vector<int> missing() {
      std::vector<int> out;
      const size_t sends = reqs.size() / 2;
      for (size_t i = sends; i < reqs.size(); ++i) {
        int done = 1;
        if (reqs[i] != MPI_REQUEST_NULL) MPI_Test(&reqs[i], &done, MPI_STATUS_IGNORE);
        if (!done) out.push_back(peers[i]);
      }
      return out;
    }
    static std::string name_of(const int64_t* a) {
      const char* k = a[1] == kAllReduce  ? "an all-reduce"
                      : a[1] == kBroadcast ? "a broadcast"
                      : a[1] == kAllGather ? "an all-gather"
                      : a[1] == kReduce    ? "a reduce"
                                           : "an unknown collective";
      return a[2] >= 0 ? fmt::format("{} of {} bytes", k, a[2]) : std::string(k);
    }
    /// Once every rank has announced this collective: an oar::Error when one announced another.
    void compare(const MpiCommunicator& c, const std::string& what) {
      if (compared || !missing().empty()) return;
      compared = true;
      for (int k = 0; k < c.size_; ++k) {
        if (k == c.rank_) continue;
        const int64_t* t = &from[size_t(3 * k)];
        const bool same = t[0] == mine[0] && t[1] == mine[1] && (mine[2] < 0 || t[2] < 0 || t[2] == mine[2]);
        if (!same)
          throw Error(fmt::format("{}: collective #{} differs between the ranks: this rank ({} of {}) runs {} where rank {} runs {} (its #{}); "
                                  "every rank must make the same collective calls in the same order",
                                  what, mine[0], c.rank_, c.size_, name_of(mine), k, name_of(t), t[0]));
      }
    }
    /// Waits for the announcements themselves (by now they have come, or come at once) and compares them.
    void finish(MpiCommunicator& c, const std::string& what) {
      std::vector<MPI_Request> all = reqs;
      reqs.clear();  // wait() polls them here, not through missing()
      c.wait(all, peers, what, *this);
      reqs.assign(all.size(), MPI_REQUEST_NULL);
      compare(c, what);
    }
  };

  void ring_all_reduce(char* data, int64_t count, DType dtype, const std::string& what) {
    const int n = size_;
    const int64_t esz = int64_t(size_of(dtype));
    const auto lo = [&](int c) { return count * c / n; };
    const auto len = [&](int c) { return lo(c + 1) - lo(c); };
    const int right = (rank_ + 1) % n, left = (rank_ + n - 1) % n;
    thread_local std::vector<char> incoming;
    incoming.resize(size_t((count / n + 1) * esz));
    Arrival arrival(*this, kAllReduce, count * esz);
    auto mod = [&](int v) { return ((v % n) + n) % n; };
    // Reduce-scatter: after n - 1 steps this rank holds the sum of chunk rank + 1.
    for (int s = 0; s < n - 1; ++s) {
      const int send_c = mod(rank_ - s), recv_c = mod(rank_ - s - 1);
      MPI_Request r[2];
      check(MPI_Irecv(incoming.data(), int(len(recv_c) * esz), MPI_BYTE, left, kDataTag, comm_, &r[1]), what);
      check(MPI_Isend(data + lo(send_c) * esz, int(len(send_c) * esz), MPI_BYTE, right, kDataTag, comm_, &r[0]), what);
      wait({r[0], r[1]}, {right, left}, what, arrival);
      if (dtype == DType::f32) add(reinterpret_cast<float*>(data) + lo(recv_c), reinterpret_cast<const float*>(incoming.data()), len(recv_c));
      else add(reinterpret_cast<double*>(data) + lo(recv_c), reinterpret_cast<const double*>(incoming.data()), len(recv_c));
    }
    // All-gather: the summed chunks travel once around the ring, copied as they are.
    for (int s = 0; s < n - 1; ++s) {
      const int send_c = mod(rank_ + 1 - s), recv_c = mod(rank_ - s);
      MPI_Request r[2];
      check(MPI_Irecv(data + lo(recv_c) * esz, int(len(recv_c) * esz), MPI_BYTE, left, kDataTag, comm_, &r[1]), what);
      check(MPI_Isend(data + lo(send_c) * esz, int(len(send_c) * esz), MPI_BYTE, right, kDataTag, comm_, &r[0]), what);
      wait({r[0], r[1]}, {right, left}, what, arrival);
    }
    arrival.finish(*this, what);
  }

  template <class T>
  static void add(T* dst, const T* src, int64_t n) {
    for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
  }

  void check(int rc, const std::string& what) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    throw Error(fmt::format("{} failed on rank {} of {}: MPI says: {}", what, rank_, size_, std::string(text, size_t(len))));
  }

  /// Polls `reqs` until they complete. Past the deadline: an oar::Error naming the ranks that never reached
  /// this collective, or else the ranks whose messages have not come (`peers[i]` is the other end of
  /// `reqs[i]`). The thread yields, then sleeps briefly between polls: on a machine whose cores all compute,
  /// a spinning communicator would take a core from the backward pass it overlaps.
  void wait(std::vector<MPI_Request> reqs, const std::vector<int>& peers, const std::string& what, Arrival& arrival) {
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + timeout_;
    std::vector<MPI_Status> st(reqs.size());
    size_t open_before = reqs.size();
    for (int polls = 0;; ++polls) {
      int done = 0;
      const int rc = MPI_Testall(int(reqs.size()), reqs.data(), &done, st.data());
      // A request that completed means the other side is at work: poll closely again (a message of the
      // rendezvous protocol takes several round trips, each as slow as the slower side's polling).
      const size_t open = size_t(std::count_if(reqs.begin(), reqs.end(), [](MPI_Request r) { return r != MPI_REQUEST_NULL; }));
      if (open < open_before) polls = 0;
      open_before = open;
      if (rc != MPI_SUCCESS) {
        int bad = -1;
        for (size_t i = 0; i < reqs.size() && bad < 0; ++i)
          if (st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING) bad = peers[i];
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, text, &len);
        throw Error(fmt::format("{}: the link to rank {} failed (this is rank {} of {}); MPI says: {}", what, bad, rank_, size_, std::string(text, size_t(len))));
      }
      if (done) return;
      if (!arrival.reqs.empty()) arrival.compare(*this, what);
      if (clock::now() > deadline) {
        std::vector<int> gone = arrival.missing();
        std::string who;
        if (!gone.empty()) {
          who = fmt::format("rank{} {} did not reach it", gone.size() > 1 ? "s" : "", fmt::join(gone, ", "));
        } else {
          std::vector<int> silent;
          for (size_t i = 0; i < reqs.size(); ++i)
            if (reqs[i] != MPI_REQUEST_NULL && std::find(silent.begin(), silent.end(), peers[i]) == silent.end()) silent.push_back(peers[i]);
          who = fmt::format("rank{} {} stopped sending", silent.size() > 1 ? "s" : "", fmt::join(silent, ", "));
        }
        throw Error(fmt::format("{}: {} within {} (this is rank {} of {}): that rank died or hangs, and the job cannot go on", what, who,
                                seconds(timeout_), rank_, size_));
      }
      if (polls < 200) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(polls < 1200 ? 10 : 200));
    }
  }

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  int64_t seq_ = 0;
  std::chrono::milliseconds timeout_;
};
#endif

inline std::atomic<bool>& context_exists() {
  static std::atomic<bool> b{false};
  return b;
}

}  // namespace detail

OAR_FUNC Context::Context(int& argc, char**& argv, Options options) : options_(options) { start(&argc, &argv); }

OAR_FUNC Context::Context(Options options) : options_(options) { start(nullptr, nullptr); }

OAR_FUNC void Context::start(int* argc, char*** argv) {
  OAR_CHECK(!detail::context_exists().exchange(true), "oar::dist::Context: there is one per process, and one exists already");
  try {
    options_.timeout = detail::timeout_from_env(options_.timeout);
    OAR_CHECK(options_.timeout.count() > 0, "oar::dist::Context: the timeout must be positive, got {} ms", options_.timeout.count());
    if (detail::started_by_mpirun()) {
#if OAR_WITH_MPI
      int provided = 0;
      MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
      if (provided < MPI_THREAD_SERIALIZED) {
        MPI_Finalize();
        throw Error(fmt::format("oar::dist::Context: this MPI gives threads level {}, and oar needs MPI_THREAD_SERIALIZED", provided));
      }
      mpi_ = true;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
      MPI_Comm_size(MPI_COMM_WORLD, &size_);
      MPI_Comm local;
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local);
      MPI_Comm_rank(local, &local_rank_);
      MPI_Comm_size(local, &local_size_);
      MPI_Comm_free(&local);
      comm_ = std::make_shared<detail::MpiCommunicator>(options_.timeout);
      // The ranks on this machine share its cores: each gets its part of them (oar::set_num_threads after
      // this overrides it), so that N ranks do not run N thread pools of every core.
      const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
      set_num_threads(std::max(1, cores / local_size_));
#else
      (void)argc, (void)argv;
      throw Error("oar::dist::Context: the process was started by mpirun, but this oar was built without MPI (OAR_WITH_MPI is off: install "
                  "libopenmpi-dev and build again)");
#endif
    } else {
      comm_ = std::make_shared<detail::SoloCommunicator>();
    }
  } catch (...) {
    detail::context_exists() = false;
    throw;
  }
  set_communicator(0, comm_);
}

OAR_FUNC Context::~Context() {
  remove_communicators(0);
  bool failed = comm_ && comm_->failed();
  {
    std::lock_guard<std::mutex> lock(devices_mu_);
    for (auto& [d, c] : devices_) failed = failed || c->failed();
    devices_.clear();  // NCCL's go first: MPI may not be finalized under them
  }
  comm_.reset();
#if OAR_WITH_MPI
  if (mpi_) {
    // After a failed collective the ranks are out of step, and MPI_Finalize could wait for the dead rank
    // forever: leave without it (mpirun then ends the job, reporting this rank).
    if (!failed) MPI_Finalize();
  }
#endif
  (void)failed;
  detail::context_exists() = false;
}

OAR_FUNC std::shared_ptr<Communicator> Context::communicator(const Place& place) const {
  if (place.is_cpu()) return comm_;
  std::lock_guard<std::mutex> lock(devices_mu_);
  std::shared_ptr<Communicator>& c = devices_[place.device];
  if (!c) {
    try {
      c = make_nccl_communicator(place.device, comm_, options_.timeout);
    } catch (...) {
      devices_.erase(place.device);
      throw;
    }
    set_communicator(0, c);
  }
  return c;
}

OAR_FUNC void Context::barrier() const {
  double x = 0;
  comm_->all_reduce_sum(&x, 1, DType::f64, "barrier");
}

OAR_FUNC DataParallel data_parallel(const Context& ctx) {
  DataParallel dp;
  dp.comm = ctx.communicator();
  dp.rank = ctx.rank();
  dp.collective.nranks = ctx.world_size();
  dp.collective.ring_id = 0;
  dp.on_device = [c = &ctx](const Place& p) { return c->communicator(p); };
  return dp;
}

}  // namespace oar::dist
