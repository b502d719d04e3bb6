// oar/device/thread_pool-inl.hpp: the implementation of thread_pool.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/device/thread_pool.hpp"

#if defined(OAR_WITH_BLAS)
#include <cblas.h>
#endif

namespace oar {

namespace detail {

OAR_FUNC int hardware_threads() {
  unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

OAR_FUNC thread_pool::thread_pool() : num_threads_(hardware_threads()) {
#if defined(OAR_WITH_BLAS)
  // OpenBLAS keeps its own pool; oar drives parallelism, so BLAS calls must be serial.
  openblas_set_num_threads(1);
#endif
  start_workers(num_threads_ - 1);
}

OAR_FUNC thread_pool::~thread_pool() { stop_workers(); }

OAR_FUNC void thread_pool::set_num_threads(int n) {
  if (n <= 0) n = hardware_threads();
  std::lock_guard<std::mutex> dispatch(dispatch_mutex_);  // waits for a running parallel_for
  if (n == num_threads_.load()) return;
  stop_workers();
  num_threads_.store(n);
  start_workers(n - 1);
}

OAR_FUNC void thread_pool::work_on(job& j) {
  for (;;) {
    int64_t i = j.next.fetch_add(1, std::memory_order_relaxed);
    if (i >= j.nchunks) return;
    if (!j.failed.load(std::memory_order_relaxed)) {
      try {
        j.run(j.ctx, chunk_bound(j.begin, j.len, j.nchunks, i),
              chunk_bound(j.begin, j.len, j.nchunks, i + 1));
      } catch (...) {
        bool expected = false;
        if (j.failed.compare_exchange_strong(expected, true)) j.error = std::current_exception();
      }
    }
    if (j.remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lk(mutex_);  // pairs with the caller's wait
      done_cv_.notify_all();
    }
  }
}

OAR_FUNC void thread_pool::worker_loop() {
  tls_in_parallel = true;
  uint64_t seen = 0;
  {
    std::lock_guard<std::mutex> lk(mutex_);
    seen = generation_;
  }
  for (;;) {
    // Short spin catches back-to-back parallel_for calls without a futex wake-up.
    if (OAR_POOL_SPIN_US > 0) {
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::microseconds(OAR_POOL_SPIN_US);
      do {
        for (int i = 0; i < 16; ++i) cpu_relax();
      } while (generation_atomic_.load(std::memory_order_acquire) == seen &&
               std::chrono::steady_clock::now() < until);
    }
    std::unique_lock<std::mutex> lk(mutex_);
    wake_cv_.wait(lk, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    job* j = job_;
    if (j == nullptr) continue;  // job already finished by others
    ++j->active;
    lk.unlock();
    work_on(*j);
    lk.lock();
    if (--j->active == 0) done_cv_.notify_all();
  }
}

OAR_FUNC void thread_pool::start_workers(int n) {
  stop_ = false;
  for (int i = 0; i < n; ++i) workers_.emplace_back([this] { worker_loop(); });
}

OAR_FUNC void thread_pool::stop_workers() {
  {
    std::lock_guard<std::mutex> lk(mutex_);
    stop_ = true;
  }
  wake_cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
}

}  // namespace detail

}  // namespace oar
