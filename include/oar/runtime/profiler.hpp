// oar/runtime/profiler.hpp: where a program's time goes, per op type, as Fluid's profiler reports it (calls,
// total, min, max, average, share of the total). Off by default: the executor then pays one relaxed atomic
// load per op. While an oar::Profiler exists every kernel the executor runs (any thread, any program) is timed.
//
//   {
//     oar::Profiler prof;
//     for (int i = 0; i < 100; ++i) opt.step(feeds);
//     fmt::print("{}", prof.report());   // a table, slowest op type first
//   }
#pragma once
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "oar/ir/program.hpp"

namespace oar {

/// Time spent in one op type's kernel while profiling.
struct OpTime {
  std::string op;
  int64_t calls = 0;
  int64_t total_ns = 0, min_ns = 0, max_ns = 0;
  double average_ns() const { return calls ? double(total_ns) / double(calls) : 0.0; }
};

namespace detail {

/// Live Profiler objects: what the executor checks per op (a constant-initialized global, so the check is
/// one relaxed load without a function-local static's guard).
inline std::atomic<int> live_profilers{0};

struct ProfileLog {
  std::atomic<int> by_op{0};  // live Profiler objects that want a line per op rather than per op type
  std::mutex mu;
  std::map<std::string, OpTime, std::less<>> ops;

  static ProfileLog& get() {
    static ProfileLog log;
    return log;
  }
  void add(std::string_view op, int64_t ns) {
    std::lock_guard lock(mu);
    auto it = ops.find(op);
    if (it == ops.end()) it = ops.emplace(std::string(op), OpTime{std::string(op), 0, 0, ns, ns}).first;
    OpTime& t = it->second;
    ++t.calls;
    t.total_ns += ns;
    t.min_ns = std::min(t.min_ns, ns);
    t.max_ns = std::max(t.max_ns, ns);
  }
};

inline bool profiling() { return live_profilers.load(std::memory_order_relaxed) > 0; }

/// Runs `fn` and, while profiling, adds its wall time to the line of `op`'s type (or of `op` itself: its type
/// and first output).
template <class Fn>
inline void timed_op(const Operator& op, Fn&& fn) {
  if (!profiling()) [[likely]] {
    fn();
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  ProfileLog& log = ProfileLog::get();
  if (log.by_op.load(std::memory_order_relaxed) > 0) {
    auto outs = op.output_names();
    log.add(fmt::format("{} -> {}", op.type(), outs.empty() ? std::string("-") : outs.front()), int64_t(ns));
  } else {
    log.add(op.type(), int64_t(ns));
  }
}

}  // namespace detail

/// Times every kernel run while it lives, per op type, or with `per_op` per op (its type and first output,
/// "conv2d -> conv2d_0.tmp_0"). Profilers may nest or overlap (the log is shared: the first one created
/// clears it, the times stay readable until the next first one).
class Profiler {
 public:
  explicit Profiler(bool per_op = false) : per_op_(per_op) {
    auto& log = detail::ProfileLog::get();
    std::lock_guard lock(log.mu);
    if (detail::live_profilers.fetch_add(1) == 0) log.ops.clear();
    if (per_op_) log.by_op.fetch_add(1);
  }
  ~Profiler() {
    auto& log = detail::ProfileLog::get();
    if (per_op_) log.by_op.fetch_sub(1);
    detail::live_profilers.fetch_sub(1);
  }
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// Per op type, the largest total first.
  std::vector<OpTime> times() const {
    auto& log = detail::ProfileLog::get();
    std::vector<OpTime> v;
    {
      std::lock_guard lock(log.mu);
      for (auto& [name, t] : log.ops) v.push_back(t);
    }
    std::stable_sort(v.begin(), v.end(), [](const OpTime& a, const OpTime& b) { return a.total_ns > b.total_ns; });
    return v;
  }
  /// The times as a table: op, calls, total / min / max / average in ms, share of the summed total.
  std::string report() const {
    auto v = times();
    int64_t sum = 0;
    for (auto& t : v) sum += t.total_ns;
    std::string s = fmt::format("{:<40} {:>8} {:>11} {:>9} {:>9} {:>9} {:>7}\n", "op", "calls", "total ms", "min ms", "max ms", "avg ms", "share");
    for (auto& t : v)
      s += fmt::format("{:<40} {:>8} {:>11.3f} {:>9.3f} {:>9.3f} {:>9.3f} {:>6.1f}%\n", t.op, t.calls, double(t.total_ns) * 1e-6, double(t.min_ns) * 1e-6,
                       double(t.max_ns) * 1e-6, t.average_ns() * 1e-6, sum ? 100.0 * double(t.total_ns) / double(sum) : 0.0);
    s += fmt::format("{:<40} {:>8} {:>11.3f}\n", "total", "", double(sum) * 1e-6);
    return s;
  }

 private:
  bool per_op_;
};

}  // namespace oar
