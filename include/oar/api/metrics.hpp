// oar/api/metrics.hpp: classification metrics that accumulate over batches and reset per pass: accuracy,
// error rate, precision / recall / F1 (per class, macro, micro), AUC (ROC, binary) and the confusion matrix.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "oar/config.hpp"
#include "oar/device/tensor.hpp"

namespace oar {

/// One metric: fed (scores [N, C], labels [N, 1] or [N]) per batch.
class Metric {
 public:
  virtual ~Metric() = default;
  virtual void reset() = 0;
  virtual void update(const Tensor& scores, const Tensor& labels) = 0;
  /// Named values ("accuracy", "f1_macro", ...).
  virtual std::map<std::string, double> eval() const = 0;

 protected:
  /// Row i's label and argmax over its C scores.
  static void rows(const Tensor& scores, const Tensor& labels, const std::function<void(int64_t label, int64_t pred, const double* row, int64_t c)>& f);
};

/// The confusion matrix (rows: true class, columns: predicted) and everything derived from it:
/// accuracy, error_rate, precision/recall/f1 per class, macro and micro averages.
class ConfusionMatrix : public Metric {
 public:
  void reset() override { m_.clear(); }
  void update(const Tensor& scores, const Tensor& labels) override;
  const std::vector<std::vector<int64_t>>& matrix() const { return m_; }
  std::map<std::string, double> eval() const override;

 private:
  void resize(int64_t c);
  std::vector<std::vector<int64_t>> m_;
};

/// Area under the ROC curve of a binary classifier, from the score of class 1 (scores [N, 2]) or a single
/// probability column ([N, 1]), with `thresholds` buckets (Fluid's Auc: 200, trapezoids).
class Auc : public Metric {
 public:
  explicit Auc(int thresholds = 200);
  void reset() override;
  void update(const Tensor& scores, const Tensor& labels) override;
  std::map<std::string, double> eval() const override;

 private:
  int n_;
  std::vector<int64_t> pos_, neg_;
};

/// Several metrics fed together; eval() merges their values.
class MetricSet {
 public:
  MetricSet& add(std::shared_ptr<Metric> m) {
    metrics_.push_back(std::move(m));
    return *this;
  }
  void reset();
  void update(const Tensor& scores, const Tensor& labels);
  std::map<std::string, double> eval() const;
  bool empty() const { return metrics_.empty(); }

 private:
  std::vector<std::shared_ptr<Metric>> metrics_;
};

}  // namespace oar

#if OAR_HEADER_ONLY
#include "oar/api/metrics-inl.hpp"
#endif
