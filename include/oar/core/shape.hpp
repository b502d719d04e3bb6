// oar/core/shape.hpp: Shape, a list of dims where -1 means "unknown until run time" (the batch, usually).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "oar/core/error.hpp"

namespace oar {

/// NOTE: the dims live inside the object (at most kMaxRank of them, Fluid's limit too), so building and
/// copying a Shape never touches the heap: kernels make output shapes on every run.
class Shape {
 public:
  static constexpr int kMaxRank = 9;

  Shape() = default;
  Shape(std::initializer_list<int64_t> d) : Shape(d.begin(), d.end()) {}
  explicit Shape(const std::vector<int64_t>& d) : Shape(d.begin(), d.end()) {}
  template <class It>
  Shape(It b, It e) {
    for (; b != e; ++b) push_back(int64_t(*b));
  }

  int rank() const { return n_; }
  size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  int64_t operator[](int i) const { return d_[size_t(i)]; }
  int64_t& operator[](int i) { return d_[size_t(i)]; }
  /// Dim `i`, where a negative i counts from the back.
  int64_t at(int i) const {
    int r = rank();
    OAR_CHECK(i >= -r && i < r, "dim {} out of range for a shape of rank {}", i, r);
    return d_[size_t(i < 0 ? i + r : i)];
  }
  std::vector<int64_t> dims() const { return {begin(), end()}; }
  const int64_t* begin() const { return d_; }
  const int64_t* end() const { return d_ + n_; }
  int64_t* begin() { return d_; }
  int64_t* end() { return d_ + n_; }
  const int64_t* data() const { return d_; }
  void push_back(int64_t d) {
    if (n_ == kMaxRank) [[unlikely]]
      throw Error(fmt::format("a shape has at most {} dims", kMaxRank));
    d_[n_++] = d;
  }
  void insert(int pos, int64_t d) {
    push_back(0);
    for (int i = n_ - 1; i > pos; --i) d_[i] = d_[i - 1];
    d_[pos] = d;
  }
  void erase(int pos) {
    for (int i = pos; i + 1 < n_; ++i) d_[i] = d_[i + 1];
    --n_;
  }
  void resize(int rank, int64_t fill = 1) {
    OAR_CHECK(rank >= 0 && rank <= kMaxRank, "a shape has at most {} dims, asked for {}", kMaxRank, rank);
    for (int i = n_; i < rank; ++i) d_[i] = fill;
    n_ = uint8_t(rank);
  }

  bool known() const {
    for (auto d : *this) if (d < 0) return false;
    return true;
  }
  /// Product of all dims; -1 when one of them is unknown.
  int64_t numel() const { return numel(0, rank()); }
  int64_t numel(int from, int to) const {
    int64_t n = 1;
    for (int i = from; i < to; ++i) {
      if (d_[i] < 0) return -1;
      n *= d_[i];
    }
    return n;
  }
  Shape slice(int from, int to) const { return Shape(d_ + from, d_ + to); }

  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.n_ != b.n_) return false;
    for (int i = 0; i < a.n_; ++i)
      if (a.d_[i] != b.d_[i]) return false;
    return true;
  }
  /// "[?, 784]": unknown dims print as ?.
  std::string str() const {
    std::string s = "[";
    for (int i = 0; i < n_; ++i) {
      if (i) s += ", ";
      s += d_[i] < 0 ? std::string("?") : std::to_string(d_[i]);
    }
    return s + "]";
  }

 private:
  int64_t d_[kMaxRank] = {};
  uint8_t n_ = 0;
};

/// Whether two dims can be the same at run time (either unknown, or equal).
inline bool dims_compatible(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

}  // namespace oar

template <> struct fmt::formatter<oar::Shape> : fmt::formatter<std::string> {
  auto format(const oar::Shape& s, format_context& ctx) const { return fmt::formatter<std::string>::format(s.str(), ctx); }
};
