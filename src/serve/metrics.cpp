// src/serve/metrics.cpp: see metrics.hpp.
#include "src/serve/metrics.hpp"

#include <fmt/format.h>

#include <memory>

namespace oar::serve {

void Histogram::observe(double v) {
  std::lock_guard lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::write(std::string& out, const std::string& name, const std::string& labels) const {
  std::lock_guard lock(mu_);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, bounds_[i], cum);
  }
  out += fmt::format("{}_bucket{{{},le=\"+Inf\"}} {}\n", name, labels, count_);
  out += fmt::format("{}_sum{{{}}} {}\n{}_count{{{}}} {}\n", name, labels, sum_, name, labels, count_);
}

std::vector<double> ModelMetrics::latency_bounds() {
  return {50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1, 2.5, 5, 10};
}

ModelMetrics& Metrics::model(const std::string& name, int64_t version) {
  std::lock_guard lock(mu_);
  auto& m = models_[{name, version}];
  if (!m) m = std::make_unique<ModelMetrics>();
  return *m;
}

void Metrics::http_status(int code) {
  std::lock_guard lock(mu_);
  ++status_[code];
}

std::string Metrics::text() const {
  std::lock_guard lock(mu_);
  std::string out;
  auto labels = [](const std::pair<std::string, int64_t>& k) { return fmt::format("model=\"{}\",version=\"{}\"", k.first, k.second); };
  out += "# HELP oar_inference_requests_total Inference requests answered, by model version and outcome.\n"
         "# TYPE oar_inference_requests_total counter\n";
  for (auto& [k, m] : models_) {
    out += fmt::format("oar_inference_requests_total{{{},status=\"success\"}} {}\n", labels(k), m->success.load());
    out += fmt::format("oar_inference_requests_total{{{},status=\"failure\"}} {}\n", labels(k), m->failure.load());
  }
  out += "# HELP oar_inference_in_flight Inference requests taken and not yet answered.\n# TYPE oar_inference_in_flight gauge\n";
  for (auto& [k, m] : models_) out += fmt::format("oar_inference_in_flight{{{}}} {}\n", labels(k), m->in_flight.load());
  struct H {
    const char* name;
    const char* help;
    Histogram ModelMetrics::*h;
  };
  for (const H& h : {H{"oar_inference_queue_seconds", "Time from a request's arrival to its batch starting.", &ModelMetrics::queue_s},
                     H{"oar_inference_compute_seconds", "Time the request's batch ran in the model.", &ModelMetrics::compute_s},
                     H{"oar_inference_request_seconds", "Time from a request's arrival to its answer.", &ModelMetrics::request_s},
                     H{"oar_inference_batch_size", "Rows of each batch run (requests batched together add up).", &ModelMetrics::batch_rows}}) {
    out += fmt::format("# HELP {} {}\n# TYPE {} histogram\n", h.name, h.help, h.name);
    for (auto& [k, m] : models_) ((*m).*h.h).write(out, h.name, labels(k));
  }
  out += "# HELP oar_http_requests_total HTTP requests answered, by status code.\n# TYPE oar_http_requests_total counter\n";
  for (auto& [code, n] : status_) out += fmt::format("oar_http_requests_total{{code=\"{}\"}} {}\n", code, n);
  return out;
}

}  // namespace oar::serve
