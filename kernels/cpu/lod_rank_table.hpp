// kernels/cpu/lod_rank_table.hpp: the rank-table ops on the CPU: lod_rank_table, max_sequence_len,
// lod_tensor_to_array (and its gradient), array_to_lod_tensor, shrink_rnn_memory (and its gradient) and
// reorder_lod_tensor_by_rank (and its gradient). They only move rows, so they take any dtype (rows are copied
// as bytes), and they serve CUDA as they are (`any_place`): rows move through place_io, and the rank table,
// which decides what moves, is read on the host.
#pragma once
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/cpu/tensor_array.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/ops/lod_rank_table.hpp"

namespace oar::cpu_kernels::array {

/// A rank table as the kernels read it: S rows (original index, length), longest first. Checked when made:
/// i64 [S, 2], lengths >= 0 and non-increasing, indices a permutation of 0..S-1.
struct RankTable {
  Tensor host;  // the table's values on the host (its own tensor on the CPU, a copy from a device)
  const int64_t* rows = nullptr;
  int64_t size = 0;
  int64_t index(int64_t r) const { return rows[2 * r]; }
  int64_t length(int64_t r) const { return rows[2 * r + 1]; }
  int64_t max_length() const { return size ? length(0) : 0; }
  /// The number of sequences longer than t (they are the table's first rows).
  int64_t active(int64_t t) const {
    int64_t k = 0;
    while (k < size && length(k) > t) ++k;
    return k;
  }
  /// Each sequence's first row when the sequences lie in original order (start[index]); returns the total rows.
  int64_t starts(std::vector<int64_t>& start) const {
    start.assign(size_t(size), 0);
    for (int64_t r = 0; r < size; ++r) start[size_t(index(r))] = length(r);
    int64_t total = 0;
    for (auto& s : start) {
      const int64_t len = s;
      s = total;
      total += len;
    }
    return total;
  }
};

inline RankTable rank_table(const KernelContext& c, Slot slot) {
  const LoDTensor& t = c.in(slot);
  const std::string& n = c.in_name(slot);
  c.check(t.dtype() == DType::i64 && t.rank() == 2 && t.dim(1) == 2, "{} ('{}') is not a rank table: it must be i64 [S, 2], got {} {}", slot.name, n,
          name(t.dtype()), t.shape());
  RankTable r;
  r.host = place_io::host(c, t);
  r.rows = r.host.data<int64_t>();
  r.size = t.dim(0);
  std::vector<bool> seen(size_t(r.size), false);
  for (int64_t k = 0; k < r.size; ++k) {
    const int64_t i = r.index(k), len = r.length(k);
    c.check(i >= 0 && i < r.size && !seen[size_t(i)], "{} ('{}') is not a rank table: row {} names sequence {} of {} (or one named before)", slot.name, n, k, i,
            r.size);
    seen[size_t(i)] = true;
    c.check(len >= 0 && (k == 0 || len <= r.length(k - 1)), "{} ('{}') is not a rank table: row {} has length {} after {} (lengths must not increase)",
            slot.name, n, k, len, k ? r.length(k - 1) : 0);
  }
  return r;
}

/// Elements per row of `s` (the product of its dims after the first).
inline int64_t row_numel(const Shape& s) {
  int64_t n = 1;
  for (int d = 1; d < s.rank(); ++d) n *= s[d];
  return n;
}

/// `s` with `rows` rows.
inline Shape with_rows(Shape s, int64_t rows) {
  s[0] = rows;
  return s;
}

/// A one-level LoD from the table's lengths in original order.
inline LoD lod_of(const RankTable& t) {
  std::vector<size_t> off(size_t(t.size) + 1, 0);
  for (int64_t r = 0; r < t.size; ++r) off[size_t(t.index(r)) + 1] = size_t(t.length(r));
  for (size_t k = 1; k < off.size(); ++k) off[k] += off[k - 1];
  return {off};
}

/// out (rows [N, d...] of `row_shape`'s trailing dims and `dtype`): sequence s (original order) gathers row t from
/// entry t of `list` at the entry's row given by s's rank. With `lenient` (a gradient), missing or empty entries
/// are zeros; otherwise every step the table needs must have its entry of k_t rows.
inline void gather_steps(const KernelContext& c, Slot slot, const TensorList& list, const RankTable& table, const Shape& row_shape, DType dtype,
                         LoDTensor& out, bool lenient) {
  std::vector<int64_t> start;
  const int64_t rows = table.starts(start), steps = table.max_length();
  const std::string& n = c.in_name(slot);
  if (!lenient) {
    c.check(int64_t(list.size()) >= steps, "the array '{}' has {} entries, but the rank table's longest sequence has {} steps", n, list.size(), steps);
    for (size_t t = size_t(steps); t < list.size(); ++t)
      c.check(is_empty(list[t]), "the array '{}' has {} entries, but the rank table's longest sequence has {} steps (entry {} is not empty)", n,
              list.size(), steps, t);
  }
  out.resize(with_rows(row_shape, rows), dtype);
  const size_t rb = size_t(row_numel(row_shape)) * size_of(dtype);
  if (lenient) place_io::zero(c, out.raw(), out.bytes());
  char* dst = static_cast<char*>(out.raw());
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t k = table.active(t);
    if (t >= int64_t(list.size()) || is_empty(list[size_t(t)])) {
      c.check(lenient || k == 0, "entry {} of the array '{}' is empty, but {} sequences have a step {}", t, n, k, t);
      continue;
    }
    const LoDTensor& e = list[size_t(t)];
    c.check(e.dtype() == dtype && e.rank() == row_shape.rank() && e.dim(0) == k && row_numel(e.shape()) == row_numel(row_shape),
            "entry {} of the array '{}' is {} {}, but the rank table has {} sequences at step {} of rows {} {}", t, n, name(e.dtype()), e.shape(), k, t,
            name(dtype), with_rows(row_shape, k));
    const char* src = static_cast<const char*>(e.raw());
    for (int64_t r = 0; r < k; ++r) place_io::copy(c, dst + size_t(start[size_t(table.index(r))] + t) * rb, src + size_t(r) * rb, rb);
  }
}

}  // namespace oar::cpu_kernels::array

namespace oar::ops {

inline void LoDRankTable::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& xt = c.in(x);
  c.check(a.level == 0 && xt.lod_level() == 1, "X ('{}') has {} LoD levels; lod_rank_table supports tensors with exactly one (level 0)", c.in_name(x),
          xt.lod_level());
  const auto& off = xt.lod()[0];
  const int64_t s = int64_t(off.size()) - 1;
  LoDTensor& o = c.out(out);
  o.resize(Shape{s, 2}, DType::i64);
  std::vector<int64_t> order(static_cast<size_t>(s)), rows(static_cast<size_t>(2 * s));
  std::iota(order.begin(), order.end(), int64_t(0));
  auto len = [&](int64_t i) { return int64_t(off[size_t(i) + 1] - off[size_t(i)]); };
  std::stable_sort(order.begin(), order.end(), [&](int64_t u, int64_t v) { return len(u) > len(v); });
  for (int64_t r = 0; r < s; ++r) rows[size_t(2 * r)] = order[size_t(r)], rows[size_t(2 * r + 1)] = len(order[size_t(r)]);
  cpu_kernels::place_io::store(c, o, rows.data());
  o.clear_lod();
}

inline void MaxSequenceLen::eval_cpu(KernelContext& c, const NoAttrs&) {
  const auto table = cpu_kernels::array::rank_table(c, rank_table);
  LoDTensor& o = c.out(out);
  o.resize(Shape{1}, DType::i64);
  const int64_t n = table.max_length();
  cpu_kernels::place_io::store(c, o, &n);
}

/// requires: X's rows are the table's sequences in original order (X's LoD, when it has one, must agree).
inline void LoDTensorToArray::eval_cpu(KernelContext& c, const NoAttrs&) {
  namespace A = cpu_kernels::array;
  const LoDTensor& xt = c.in(x);
  const auto table = A::rank_table(c, rank_table);
  c.check(xt.rank() >= 1, "X ('{}') must have rows (rank >= 1), got a scalar", c.in_name(x));
  c.check(xt.lod_level() <= 1, "X ('{}') has {} LoD levels; only one is supported", c.in_name(x), xt.lod_level());
  std::vector<int64_t> start;
  const int64_t rows = table.starts(start);
  c.check(rows == xt.dim(0), "X ('{}') has {} rows, but the lengths of the rank table '{}' add up to {}", c.in_name(x), xt.dim(0), c.in_name(rank_table), rows);
  if (xt.lod_level() == 1) {
    const auto& off = xt.lod()[0];
    c.check(int64_t(off.size()) - 1 == table.size, "X ('{}') has {} sequences, but the rank table '{}' lists {}", c.in_name(x), off.size() - 1,
            c.in_name(rank_table), table.size);
    for (int64_t r = 0; r < table.size; ++r) {
      const size_t i = size_t(table.index(r));
      c.check(int64_t(off[i + 1] - off[i]) == table.length(r), "the LoD of X ('{}') does not match the rank table '{}': sequence {} has {} rows, the table says {}",
              c.in_name(x), c.in_name(rank_table), i, off[i + 1] - off[i], table.length(r));
    }
  }
  const int64_t steps = table.max_length();
  auto& list = A::out(c, out);
  list.resize(size_t(steps));
  const size_t rb = size_t(A::row_numel(xt.shape())) * size_of(xt.dtype());
  const char* src = static_cast<const char*>(xt.raw());
  for (int64_t t = 0; t < steps; ++t) {
    const int64_t k = table.active(t);
    LoDTensor& e = list[size_t(t)];
    e.set_place(c.place());
    e.resize(A::with_rows(xt.shape(), k), xt.dtype());
    e.clear_lod();
    char* dst = static_cast<char*>(e.raw());
    for (int64_t r = 0; r < k; ++r) cpu_kernels::place_io::copy(c, dst + size_t(r) * rb, src + size_t(start[size_t(table.index(r))] + t) * rb, rb);
  }
}

/// X@GRAD = array_to_lod_tensor(Out@GRAD) shaped like X (missing or empty entries: zeros), with X's LoD.
inline void LoDTensorToArray::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  namespace A = cpu_kernels::array;
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const auto table = A::rank_table(c, rank_table);
  static const A::TensorList none;
  const auto& grads = c.has_in(out_grad) ? A::in(c, out_grad) : none;
  LoDTensor& dx = c.out(x_grad);
  A::gather_steps(c, out_grad, grads, table, xt.shape(), xt.dtype(), dx, true);
  c.check(dx.shape() == xt.shape(), "X ('{}') is {}, but the rank table '{}' gives {}", c.in_name(x), xt.shape(), c.in_name(rank_table), dx.shape());
  dx.set_lod(xt.lod());
}

inline void ArrayToLoDTensor::eval_cpu(KernelContext& c, const NoAttrs&) {
  namespace A = cpu_kernels::array;
  const auto& list = A::in(c, x);
  const auto table = A::rank_table(c, rank_table);
  // The rows' dims and dtype come from the first entry (an array without entries gives [0] rows).
  Shape row{0};
  DType dtype = DType::f32;
  for (auto& e : list)
    if (e.initialized() && e.rank() >= 1) {
      row = e.shape();
      dtype = e.dtype();
      break;
    }
  LoDTensor& o = c.out(out);
  A::gather_steps(c, x, list, table, row, dtype, o, false);
  o.set_lod(A::lod_of(table));
}

inline void ShrinkRNNMemory::eval_cpu(KernelContext& c, const NoAttrs&) {
  namespace A = cpu_kernels::array;
  const LoDTensor& xt = c.in(x);
  const int64_t step = A::index(c, i);
  const auto table = A::rank_table(c, rank_table);
  c.check(xt.rank() >= 1, "X ('{}') must have rows (rank >= 1), got a scalar", c.in_name(x));
  const int64_t k = table.active(step);
  c.check(k <= xt.dim(0), "X ('{}') has {} rows, but {} sequences of the rank table '{}' are longer than {}", c.in_name(x), xt.dim(0), k, c.in_name(rank_table),
          step);
  LoDTensor& o = c.out(out);
  const Shape s = A::with_rows(xt.shape(), k);
  if (&o == &xt) {  // in place: the first k rows are already where they belong
    o.set_shape(s);
    o.clear_lod();
    return;
  }
  o.resize(s, xt.dtype());
  cpu_kernels::place_io::copy(c, o.raw(), xt.raw(), o.bytes());
  o.clear_lod();
}

/// X@GRAD = Out@GRAD's rows, then zero rows up to X's.
inline void ShrinkRNNMemory::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  namespace A = cpu_kernels::array;
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& g = c.in(out_grad);
  c.check(g.dtype() == xt.dtype() && g.rank() == xt.rank() && g.dim(0) <= xt.dim(0) && A::row_numel(g.shape()) == A::row_numel(xt.shape()),
          "Out@GRAD ('{}') {} {} does not fit X ('{}') {} {}", c.in_name(out_grad), name(g.dtype()), g.shape(), c.in_name(x), name(xt.dtype()), xt.shape());
  LoDTensor& dx = c.out(x_grad);
  c.check(&dx != &g, "X@GRAD cannot be Out@GRAD");
  dx.resize(xt.shape(), xt.dtype());
  cpu_kernels::place_io::copy(c, dx.raw(), g.raw(), g.bytes());
  if (dx.bytes() > g.bytes()) cpu_kernels::place_io::zero(c, static_cast<char*>(dx.raw()) + g.bytes(), dx.bytes() - g.bytes());
  dx.set_lod(xt.lod());
}

namespace array_detail {
/// The rows of x's units in rank order: unit r of the output is x's unit table.index(r), where a unit is a row
/// (x without LoD) or a sequence (x with one level). `first[u]`, `count[u]`: unit u's rows in x. Checks that x
/// has one unit per sequence of the table.
inline void rank_units(const KernelContext& c, Slot xs, const LoDTensor& xt, const cpu_kernels::array::RankTable& table, std::vector<int64_t>& first,
                       std::vector<int64_t>& count) {
  c.check(xt.rank() >= 1, "X ('{}') must have rows (rank >= 1), got a scalar", c.in_name(xs));
  c.check(xt.lod_level() <= 1, "X ('{}') has {} LoD levels; only tensors with at most one are supported", c.in_name(xs), xt.lod_level());
  if (xt.lod_level() == 0) {
    c.check(xt.dim(0) == table.size, "X ('{}') has {} rows, but the rank table lists {} sequences (without LoD, X holds one row per sequence)", c.in_name(xs),
            xt.dim(0), table.size);
    first.resize(size_t(table.size));
    std::iota(first.begin(), first.end(), int64_t(0));
    count.assign(size_t(table.size), 1);
    return;
  }
  const auto& off = xt.lod()[0];
  c.check(int64_t(off.size()) - 1 == table.size, "X ('{}') has {} sequences, but the rank table lists {}", c.in_name(xs), off.size() - 1, table.size);
  first.resize(size_t(table.size));
  count.resize(size_t(table.size));
  for (size_t u = 0; u < size_t(table.size); ++u) first[u] = int64_t(off[u]), count[u] = int64_t(off[u + 1] - off[u]);
}
}  // namespace array_detail

inline void ReorderLoDTensorByRank::eval_cpu(KernelContext& c, const NoAttrs&) {
  namespace A = cpu_kernels::array;
  const LoDTensor& xt = c.in(x);
  const auto table = A::rank_table(c, rank_table);
  std::vector<int64_t> first, count;
  array_detail::rank_units(c, x, xt, table, first, count);
  LoDTensor& o = c.out(out);
  c.check(&o != &xt, "Out cannot be X");
  o.resize(xt.shape(), xt.dtype());
  const size_t rb = size_t(A::row_numel(xt.shape())) * size_of(xt.dtype());
  const char* src = static_cast<const char*>(xt.raw());
  char* dst = static_cast<char*>(o.raw());
  std::vector<size_t> off{0};
  for (int64_t r = 0; r < table.size; ++r) {
    const size_t u = size_t(table.index(r));
    cpu_kernels::place_io::copy(c, dst + off.back() * rb, src + size_t(first[u]) * rb, size_t(count[u]) * rb);
    off.push_back(off.back() + size_t(count[u]));
  }
  if (xt.lod_level() == 1) o.set_lod(LoD{std::move(off)});
  else o.clear_lod();
}

/// X@GRAD: Out@GRAD's units moved back to where they came from (the inverse permutation), with X's LoD.
inline void ReorderLoDTensorByRank::eval_grad_cpu(KernelContext& c, const NoAttrs&) {
  namespace A = cpu_kernels::array;
  if (!c.has_out(x_grad)) return;
  const LoDTensor& xt = c.in(x);
  const LoDTensor& g = c.in(out_grad);
  const auto table = A::rank_table(c, rank_table);
  c.check(g.shape() == xt.shape() && g.dtype() == xt.dtype(), "Out@GRAD ('{}') {} {} does not match X ('{}') {} {}", c.in_name(out_grad), name(g.dtype()),
          g.shape(), c.in_name(x), name(xt.dtype()), xt.shape());
  std::vector<int64_t> first, count;
  array_detail::rank_units(c, x, xt, table, first, count);
  LoDTensor& dx = c.out(x_grad);
  c.check(&dx != &g, "X@GRAD cannot be Out@GRAD");
  dx.resize(xt.shape(), xt.dtype());
  const size_t rb = size_t(A::row_numel(xt.shape())) * size_of(xt.dtype());
  const char* src = static_cast<const char*>(g.raw());
  char* dst = static_cast<char*>(dx.raw());
  size_t at = 0;
  for (int64_t r = 0; r < table.size; ++r) {
    const size_t u = size_t(table.index(r));
    cpu_kernels::place_io::copy(c, dst + size_t(first[u]) * rb, src + at * rb, size_t(count[u]) * rb);
    at += size_t(count[u]);
  }
  dx.set_lod(xt.lod());
}

}  // namespace oar::ops
