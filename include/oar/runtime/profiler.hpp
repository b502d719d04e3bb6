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
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "oar/config.hpp"

namespace oar {

class Operator;

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

/// Adds `ns` to the line of `op`'s type (or of `op` itself while a per-op Profiler lives).
void record_op_time(const Operator& op, int64_t ns);

inline bool profiling() { return live_profilers.load(std::memory_order_relaxed) > 0; }

/// Kernel time this thread has recorded (timed_op), so that an executor run can tell its own time apart.
inline thread_local int64_t kernel_ns = 0;

/// Adds `ns` to the line `what` (a part of a run that is no op: "(feed)", "(fetch)", "(executor)").
void record_section(std::string_view what, int64_t ns);

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
  kernel_ns += int64_t(ns);
  record_op_time(op, int64_t(ns));
}

}  // namespace detail

/// Times every kernel run while it lives, per op type, and the rest of each executor run as three lines of
/// their own: "(feed)" (copying feeds to the executor's place), "(fetch)" (copying fetches to the host) and
/// "(executor)" (everything else: scheduling, checks, freeing; on a GPU the kernels' launch is in the op's
/// line, their execution in none, as it runs behind the host), or with `per_op` per op (its type and first output,
/// "conv2d -> conv2d_0.tmp_0"). Profilers may nest or overlap (the log is shared: the first one created
/// clears it, the times stay readable until the next first one).
class Profiler {
 public:
  explicit Profiler(bool per_op = false);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  /// Per op type, the largest total first.
  std::vector<OpTime> times() const;
  /// The times as a table: op, calls, total / min / max / average in ms, share of the summed total.
  std::string report() const;

 private:
  bool per_op_;
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/runtime/profiler-inl.hpp"
#endif
