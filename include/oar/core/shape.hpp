// oar/core/shape.hpp: Shape, a list of dims where -1 means "unknown until run time" (the batch, usually).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "oar/core/error.hpp"

namespace oar {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> d) : dims_(d) {}
  explicit Shape(std::vector<int64_t> d) : dims_(std::move(d)) {}
  template <class It> Shape(It b, It e) : dims_(b, e) {}

  int rank() const { return int(dims_.size()); }
  size_t size() const { return dims_.size(); }
  bool empty() const { return dims_.empty(); }
  int64_t operator[](int i) const { return dims_[size_t(i)]; }
  int64_t& operator[](int i) { return dims_[size_t(i)]; }
  /// Dim `i`, where a negative i counts from the back.
  int64_t at(int i) const {
    int r = rank();
    OAR_CHECK(i >= -r && i < r, "dim {} out of range for a shape of rank {}", i, r);
    return dims_[size_t(i < 0 ? i + r : i)];
  }
  const std::vector<int64_t>& dims() const { return dims_; }
  std::vector<int64_t>& dims() { return dims_; }
  auto begin() const { return dims_.begin(); }
  auto end() const { return dims_.end(); }
  void push_back(int64_t d) { dims_.push_back(d); }
  void insert(int pos, int64_t d) { dims_.insert(dims_.begin() + pos, d); }
  void erase(int pos) { dims_.erase(dims_.begin() + pos); }

  bool known() const {
    for (auto d : dims_) if (d < 0) return false;
    return true;
  }
  /// Product of all dims; -1 when one of them is unknown.
  int64_t numel() const { return numel(0, rank()); }
  int64_t numel(int from, int to) const {
    int64_t n = 1;
    for (int i = from; i < to; ++i) {
      if (dims_[size_t(i)] < 0) return -1;
      n *= dims_[size_t(i)];
    }
    return n;
  }
  Shape slice(int from, int to) const { return Shape(dims_.begin() + from, dims_.begin() + to); }

  friend bool operator==(const Shape&, const Shape&) = default;
  /// "[?, 784]": unknown dims print as ?.
  std::string str() const {
    std::string s = "[";
    for (size_t i = 0; i < dims_.size(); ++i) {
      if (i) s += ", ";
      s += dims_[i] < 0 ? std::string("?") : std::to_string(dims_[i]);
    }
    return s + "]";
  }

 private:
  std::vector<int64_t> dims_;
};

/// Whether two dims can be the same at run time (either unknown, or equal).
inline bool dims_compatible(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

}  // namespace oar

template <> struct fmt::formatter<oar::Shape> : fmt::formatter<std::string> {
  auto format(const oar::Shape& s, format_context& ctx) const { return fmt::formatter<std::string>::format(s.str(), ctx); }
};
