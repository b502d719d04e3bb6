// src/serve/metrics.hpp: the server's counters and histograms, written out in Prometheus' text format.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace oar::serve {

/// Cumulative buckets with fixed upper bounds (Prometheus' histogram).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  /// `name_bucket{labels,le="..."} n` lines, then _sum and _count.
  void write(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

/// What one model version has done.
struct ModelMetrics {
  std::atomic<uint64_t> success{0}, failure{0};
  std::atomic<int64_t> in_flight{0};
  Histogram queue_s{latency_bounds()}, compute_s{latency_bounds()}, request_s{latency_bounds()};
  Histogram batch_rows{{1, 2, 4, 8, 16, 32, 64, 128, 256}};
  static std::vector<double> latency_bounds();
};

/// Every model version's metrics (kept after a version is retired, as Prometheus counters must not go back)
/// and the HTTP status counts.
class Metrics {
 public:
  ModelMetrics& model(const std::string& name, int64_t version);
  void http_status(int code);
  std::string text() const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int64_t>, std::unique_ptr<ModelMetrics>> models_;
  std::map<int, uint64_t> status_;
};

}  // namespace oar::serve
