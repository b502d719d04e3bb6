// oar/device/thread_pool.hpp - the single intra-op thread pool of oar.
// parallel_for splits [begin,end) into deterministic chunks run by the caller plus idle workers.
// When OAR_WITH_BLAS is defined the pool forces OpenBLAS to run single-threaded (one pool only).
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "oar/config.hpp"

// Microseconds an idle worker (or a caller waiting for workers) spins before blocking on a condition
// variable: waking a blocked thread costs more than the short gaps between one op's parallel regions
// (docs/benchmarks.md, "Design measurements behind kernel choices"). Define 0 to block at once.
#ifndef OAR_POOL_SPIN_US
#define OAR_POOL_SPIN_US 50
#endif

namespace oar {

namespace detail {

/// std::thread::hardware_concurrency(), at least 1.
int hardware_threads();

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();  // _mm_pause without <immintrin.h> (60k lines in every model unit)
#else
  std::this_thread::yield();
#endif
}

// True on pool workers and on a caller while it runs its own chunks: nested
// parallel_for calls then run inline (same chunk boundaries, sequentially).
inline thread_local bool tls_in_parallel = false;

// Number of chunks for a range; depends only on (len, grain, threads).
inline int64_t chunk_count(int64_t len, int64_t grain, int threads) {
  if (len <= 0) return 0;
  if (grain < 1) grain = 1;
  int64_t by_grain = len / grain;  // len < 2*grain => 1 chunk
  return std::max<int64_t>(1, std::min<int64_t>(threads, by_grain));
}

// Boundary i of n equal-ish chunks over [begin, begin+len): first len%n chunks get one extra.
inline int64_t chunk_bound(int64_t begin, int64_t len, int64_t n, int64_t i) {
  int64_t q = len / n, r = len % n;
  return begin + i * q + std::min(i, r);
}

class thread_pool {
 public:
  thread_pool();
  ~thread_pool();
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  int num_threads() const { return num_threads_.load(std::memory_order_relaxed); }

  void set_num_threads(int n);

  template <class F>
  void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& fn) {
    const int64_t len = end - begin;
    if (len <= 0) return;
    const int threads = num_threads();
    const int64_t nchunks = chunk_count(len, grain, threads);
    if (nchunks == 1) {
      fn(begin, end);
      return;
    }
    // Nested call or pool busy with another user thread: run the same chunks inline.
    std::unique_lock<std::mutex> dispatch(dispatch_mutex_, std::defer_lock);
    if (tls_in_parallel || !dispatch.try_lock() || threads != num_threads() ||
        workers_.empty()) {
      for (int64_t i = 0; i < nchunks; ++i)
        fn(chunk_bound(begin, len, nchunks, i), chunk_bound(begin, len, nchunks, i + 1));
      return;
    }

    using fn_t = std::remove_reference_t<F>;
    job j;
    j.ctx = const_cast<void*>(static_cast<const void*>(&fn));
    j.run = [](void* ctx, int64_t lo, int64_t hi) { (*static_cast<fn_t*>(ctx))(lo, hi); };
    j.begin = begin;
    j.len = len;
    j.nchunks = nchunks;
    j.next.store(0, std::memory_order_relaxed);
    j.remaining.store(nchunks, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lk(mutex_);
      job_ = &j;
      ++generation_;
      generation_atomic_.store(generation_, std::memory_order_release);
    }
    if (nchunks - 1 >= static_cast<int64_t>(workers_.size()))
      wake_cv_.notify_all();
    else
      for (int64_t i = 0; i < nchunks - 1; ++i) wake_cv_.notify_one();

    tls_in_parallel = true;
    work_on(j);
    tls_in_parallel = false;

    // Wait for all chunks: optional brief spin, then block.
    if (OAR_POOL_SPIN_US > 0) {
      const auto until =
          std::chrono::steady_clock::now() + std::chrono::microseconds(OAR_POOL_SPIN_US);
      while (j.remaining.load(std::memory_order_acquire) != 0 &&
             std::chrono::steady_clock::now() < until)
        cpu_relax();
    }
    std::unique_lock<std::mutex> lk(mutex_);
    done_cv_.wait(lk, [&] { return j.remaining.load(std::memory_order_acquire) == 0; });
    job_ = nullptr;  // no worker can join any more
    done_cv_.wait(lk, [&] { return j.active == 0; });
    lk.unlock();
    if (j.error) std::rethrow_exception(j.error);
  }

 private:
  struct job {
    void* ctx = nullptr;
    void (*run)(void*, int64_t, int64_t) = nullptr;
    int64_t begin = 0, len = 0, nchunks = 0;
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> remaining{0};
    std::atomic<bool> failed{false};
    std::exception_ptr error;  // written once, by whoever sets failed
    int active = 0;            // workers attached (guarded by mutex_)
  };

  // Claim chunks until none are left. Returns after the last claimed chunk is done.
  void work_on(job& j);
  void worker_loop();
  void start_workers(int n);
  void stop_workers();

  std::atomic<int> num_threads_;
  std::mutex dispatch_mutex_;  // one parallel region at a time
  std::mutex mutex_;           // guards job_, generation_, stop_, job::active
  std::condition_variable wake_cv_;
  std::condition_variable done_cv_;
  job* job_ = nullptr;
  uint64_t generation_ = 0;
  std::atomic<uint64_t> generation_atomic_{0};
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

inline thread_pool& pool() {
  static thread_pool instance;
  return instance;
}

}  // namespace detail

// Sets the intra-op thread count (n <= 0: hardware threads). Blocks while a parallel_for runs.
inline void set_num_threads(int n) { detail::pool().set_num_threads(n); }

// Current intra-op thread count (caller included). Default: std::thread::hardware_concurrency().
inline int num_threads() { return detail::pool().num_threads(); }

// True while running inside a parallel_for chunk (nested calls then run inline).
inline bool in_parallel_region() { return detail::tls_in_parallel; }

// Calls fn(lo, hi) on disjoint chunks covering [begin, end). Chunk boundaries depend only on
// (begin, end, grain, num_threads()): n = clamp((end-begin)/grain, 1, num_threads()) equal chunks.
// Runs inline when n == 1, when nested inside another parallel_for, or when another user thread
// currently owns the pool (concurrent callers are not serialized: the later one runs its chunks
// inline, sequentially, on its own thread). Exceptions from fn are rethrown on the caller (the
// first one wins; chunks not yet started are skipped).
template <class F>
inline void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& fn) {
  // Fewer than two grains make one chunk whatever the thread count: run it here without touching the pool.
  const int64_t len = end - begin;
  if (len <= 0) return;
  if (len < 2 * std::max<int64_t>(grain, 1)) {
    fn(begin, end);
    return;
  }
  detail::pool().parallel_for(begin, end, grain, std::forward<F>(fn));
}

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/device/thread_pool-inl.hpp"
#endif
