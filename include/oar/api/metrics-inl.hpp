// oar/api/metrics-inl.hpp: the implementation of metrics.hpp (included by it when header-only; compiled once into liboar otherwise).
#pragma once
#include "oar/api/metrics.hpp"

#include <algorithm>

#include "oar/core/error.hpp"

namespace oar {

OAR_FUNC void Metric::rows(const Tensor& scores, const Tensor& labels,
                           const std::function<void(int64_t label, int64_t pred, const double* row, int64_t c)>& f) {
  OAR_CHECK(scores.rank() == 2, "metric: scores must be [N, C], got {}", scores.shape().str());
  int64_t n = scores.dim(0), c = scores.dim(1);
  OAR_CHECK(labels.numel() == n, "metric: {} labels for {} rows of scores", labels.numel(), n);
  std::vector<double> row(static_cast<size_t>(c));
  for (int64_t i = 0; i < n; ++i) {
    int64_t best = 0;
    for (int64_t j = 0; j < c; ++j) {
      row[size_t(j)] = scores.get(i * c + j);
      if (row[size_t(j)] > row[size_t(best)]) best = j;
    }
    int64_t label = int64_t(labels.get(i));
    OAR_CHECK(label >= 0 && label < c, "metric: label {} of row {} is out of range [0, {})", label, i, c);
    f(label, best, row.data(), c);
  }
}

OAR_FUNC void ConfusionMatrix::update(const Tensor& scores, const Tensor& labels) {
  rows(scores, labels, [&](int64_t l, int64_t p, const double*, int64_t c) {
    if (int64_t(m_.size()) < c) resize(c);
    m_[size_t(l)][size_t(p)]++;
  });
}

OAR_FUNC std::map<std::string, double> ConfusionMatrix::eval() const {
  std::map<std::string, double> out;
  int64_t c = int64_t(m_.size()), total = 0, right = 0;
  double p_sum = 0, r_sum = 0, f_sum = 0;
  for (int64_t k = 0; k < c; ++k) {
    int64_t tp = m_[size_t(k)][size_t(k)], pred = 0, actual = 0;
    for (int64_t j = 0; j < c; ++j) {
      pred += m_[size_t(j)][size_t(k)];
      actual += m_[size_t(k)][size_t(j)];
      total += m_[size_t(k)][size_t(j)];
    }
    right += tp;
    double p = pred ? double(tp) / double(pred) : 0, r = actual ? double(tp) / double(actual) : 0;
    double f = p + r > 0 ? 2 * p * r / (p + r) : 0;
    out[fmt::format("precision_{}", k)] = p;
    out[fmt::format("recall_{}", k)] = r;
    out[fmt::format("f1_{}", k)] = f;
    p_sum += p, r_sum += r, f_sum += f;
  }
  out["accuracy"] = total ? double(right) / double(total) : 0;
  out["error_rate"] = total ? 1 - out["accuracy"] : 0;
  out["precision_macro"] = c ? p_sum / double(c) : 0;
  out["recall_macro"] = c ? r_sum / double(c) : 0;
  out["f1_macro"] = c ? f_sum / double(c) : 0;
  // Micro averages pool every class: for single-label classification they all equal accuracy.
  out["precision_micro"] = out["recall_micro"] = out["f1_micro"] = out["accuracy"];
  return out;
}

OAR_FUNC void ConfusionMatrix::resize(int64_t c) {
  m_.resize(size_t(c));
  for (auto& r : m_) r.resize(size_t(c), 0);
}

OAR_FUNC Auc::Auc(int thresholds) : n_(thresholds) { reset(); }

OAR_FUNC void Auc::reset() {
  pos_.assign(size_t(n_) + 1, 0);
  neg_.assign(size_t(n_) + 1, 0);
}

OAR_FUNC void Auc::update(const Tensor& scores, const Tensor& labels) {
  OAR_CHECK(scores.rank() == 2 && (scores.dim(1) == 2 || scores.dim(1) == 1), "auc: scores must be [N, 2] or [N, 1], got {}", scores.shape().str());
  int64_t n = scores.dim(0), c = scores.dim(1);
  OAR_CHECK(labels.numel() == n, "auc: {} labels for {} rows", labels.numel(), n);
  for (int64_t i = 0; i < n; ++i) {
    double s = std::clamp(scores.get(i * c + c - 1), 0.0, 1.0);
    auto bucket = size_t(s * n_);
    int64_t l = int64_t(labels.get(i));
    OAR_CHECK(l == 0 || l == 1, "auc: label {} of row {} is not 0 or 1", l, i);
    (l ? pos_ : neg_)[bucket]++;
  }
}

OAR_FUNC std::map<std::string, double> Auc::eval() const {
  // Sweep thresholds from high to low, accumulating true and false positives.
  double tp = 0, fp = 0, area = 0, P = 0, N = 0;
  for (int i = 0; i <= n_; ++i) P += double(pos_[size_t(i)]), N += double(neg_[size_t(i)]);
  if (P == 0 || N == 0) return {{"auc", 0.0}};
  for (int i = n_; i >= 0; --i) {
    double tp2 = tp + double(pos_[size_t(i)]), fp2 = fp + double(neg_[size_t(i)]);
    area += (fp2 - fp) * (tp + tp2) / 2;
    tp = tp2, fp = fp2;
  }
  return {{"auc", area / (P * N)}};
}

OAR_FUNC void MetricSet::reset() {
  for (auto& m : metrics_) m->reset();
}

OAR_FUNC void MetricSet::update(const Tensor& scores, const Tensor& labels) {
  for (auto& m : metrics_) m->update(scores, labels);
}

OAR_FUNC std::map<std::string, double> MetricSet::eval() const {
  std::map<std::string, double> out;
  for (auto& m : metrics_)
    for (auto& [k, v] : m->eval()) out[k] = v;
  return out;
}

}  // namespace oar
