// oar/runtime/profiler-inl.hpp: the implementation of profiler.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/runtime/profiler.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <string_view>

#include <fmt/format.h>

#include "oar/ir/program.hpp"

namespace oar {

namespace detail {

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

OAR_FUNC void record_section(std::string_view what, int64_t ns) { ProfileLog::get().add(what, ns); }

OAR_FUNC void record_op_time(const Operator& op, int64_t ns) {
  ProfileLog& log = ProfileLog::get();
  if (log.by_op.load(std::memory_order_relaxed) > 0) {
    auto outs = op.output_names();
    log.add(fmt::format("{} -> {}", op.type(), outs.empty() ? std::string("-") : outs.front()), ns);
  } else {
    log.add(op.type(), ns);
  }
}

}  // namespace detail

OAR_FUNC Profiler::Profiler(bool per_op) : per_op_(per_op) {
  auto& log = detail::ProfileLog::get();
  std::lock_guard lock(log.mu);
  if (detail::live_profilers.fetch_add(1) == 0) log.ops.clear();
  if (per_op_) log.by_op.fetch_add(1);
}

OAR_FUNC Profiler::~Profiler() {
  auto& log = detail::ProfileLog::get();
  if (per_op_) log.by_op.fetch_sub(1);
  detail::live_profilers.fetch_sub(1);
}

OAR_FUNC std::vector<OpTime> Profiler::times() const {
  auto& log = detail::ProfileLog::get();
  std::vector<OpTime> v;
  {
    std::lock_guard lock(log.mu);
    for (auto& [name, t] : log.ops) v.push_back(t);
  }
  std::stable_sort(v.begin(), v.end(), [](const OpTime& a, const OpTime& b) { return a.total_ns > b.total_ns; });
  return v;
}

OAR_FUNC std::string Profiler::report() const {
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

}  // namespace oar
