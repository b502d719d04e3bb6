// oar/device/communicator-inl.hpp: the implementation of communicator.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/device/communicator.hpp"

#include <chrono>
#include <cstring>
#include <map>
#include <tuple>

#include "oar/core/error.hpp"

namespace oar {

OAR_FUNC Communicator::~Communicator() { stop(); }

OAR_FUNC void Communicator::check_sum_dtype(DType dtype, const char* op, const std::string& what) {
  OAR_CHECK(dtype == DType::f32 || dtype == DType::f64, "{}: {} sums f32 or f64, not {}", what, op, name(dtype));
}

OAR_FUNC void Communicator::queue(std::function<void()> job) {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) std::rethrow_exception(error_);
  jobs_.push_back(std::move(job));
  if (!thread_.joinable()) thread_ = std::thread([this] { work(); });
  cv_.notify_all();
}

OAR_FUNC void Communicator::wait() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return (jobs_.empty() && running_ == 0) || error_; });
  stats_.waited_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (error_) std::rethrow_exception(error_);
}

OAR_FUNC Communicator::Stats Communicator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

OAR_FUNC void Communicator::reset_stats() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_ = {};
}

OAR_FUNC void Communicator::run(std::function<void()> job) {
  queue(std::move(job));
  wait();
}

OAR_FUNC bool Communicator::failed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bool(error_);
}

OAR_FUNC void Communicator::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

OAR_FUNC void Communicator::work() {
  worker_id_ = std::this_thread::get_id();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return !jobs_.empty() || stop_; });
    if (jobs_.empty()) return;  // stopping, nothing left
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    if (error_) {  // after a failure the ranks are out of step: later collectives must not run
      cv_.notify_all();
      continue;
    }
    ++running_;
    lock.unlock();
    std::exception_ptr e;
    const auto t0 = std::chrono::steady_clock::now();
    try {
      job();
    } catch (...) {
      e = std::current_exception();
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    lock.lock();
    stats_.busy_seconds += took;
    --running_;
    if (e && !error_) error_ = e;
    cv_.notify_all();
  }
}

namespace detail {
/// Calls fn(data, count) on the parts packed into one host buffer (one part: as it is), then unpacks them.
template <class F>
void with_packed(const std::vector<void*>& parts, const std::vector<int64_t>& counts, DType dtype, bool unpack, F&& fn) {
  if (parts.size() == 1) return fn(parts[0], counts[0]);
  thread_local std::vector<char> pack;  // a communicator's collectives run on its one thread
  const size_t esz = size_of(dtype);
  int64_t count = 0;
  for (int64_t n : counts) count += n;
  pack.resize(size_t(count) * esz);
  size_t at = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    if (counts[k]) std::memcpy(pack.data() + at, parts[k], size_t(counts[k]) * esz);
    at += size_t(counts[k]) * esz;
  }
  fn(static_cast<void*>(pack.data()), count);
  if (!unpack) return;
  at = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    if (counts[k]) std::memcpy(parts[k], pack.data() + at, size_t(counts[k]) * esz);
    at += size_t(counts[k]) * esz;
  }
}
}  // namespace detail

OAR_FUNC void Communicator::all_reduce_sum(const std::vector<void*>& parts, const std::vector<int64_t>& counts, DType dtype, const std::string& what) {
  detail::with_packed(parts, counts, dtype, true, [&](void* data, int64_t count) { all_reduce_sum(data, count, dtype, what); });
}

OAR_FUNC void Communicator::reduce_sum(const std::vector<void*>& parts, const std::vector<int64_t>& counts, DType dtype, int root, const std::string& what) {
  detail::with_packed(parts, counts, dtype, rank() == root, [&](void* data, int64_t count) { reduce_sum(data, count, dtype, root, what); });
}

namespace detail {
struct CommunicatorTable {
  std::mutex mu;
  std::map<std::tuple<int, int, int>, std::shared_ptr<Communicator>> by_ring;  // (ring, place kind, device)
};
inline CommunicatorTable& communicator_table() {
  static CommunicatorTable t;
  return t;
}
}  // namespace detail

OAR_FUNC void set_communicator(int ring_id, std::shared_ptr<Communicator> c) {
  if (!c) return remove_communicators(ring_id);
  auto& t = detail::communicator_table();
  const Place p = c->place();
  std::lock_guard<std::mutex> lock(t.mu);
  t.by_ring[{ring_id, int(p.kind), p.is_cpu() ? 0 : p.device}] = std::move(c);
}

OAR_FUNC void remove_communicators(int ring_id) {
  auto& t = detail::communicator_table();
  std::lock_guard<std::mutex> lock(t.mu);
  std::erase_if(t.by_ring, [&](const auto& kv) { return std::get<0>(kv.first) == ring_id; });
}

OAR_FUNC std::shared_ptr<Communicator> find_communicator(int ring_id, const Place& place) {
  auto& t = detail::communicator_table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.by_ring.find({ring_id, int(place.kind), place.is_cpu() ? 0 : place.device});
  return it == t.by_ring.end() ? nullptr : it->second;
}

}  // namespace oar
