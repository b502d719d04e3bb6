// kernels/cpu/split_merge_lod_tensor.hpp: split_lod_tensor, merge_lod_tensor and merge_lod_tensor_grad on the
// CPU and, the same code, on CUDA (the ops are `any_place`): whole rows moved as bytes (any dtype), one copy per
// run of neighbouring items on one side, in X's order. On a GPU the mask comes to the host (a stream sync: which
// rows move is decided there, as the LoD is) and each run is one copy on the kernel's stream.
#pragma once
#include <cstring>

#include "kernels/cpu/sequence_pool.hpp"
#include "kernels/cpu/place_io.hpp"
#include "oar/ops/split_merge_lod_tensor.hpp"

namespace oar::cpu_kernels {

/// Makes `t` shaped like `like` past the rows, with `rows` rows.
inline void resize_rows_like(Tensor& t, const Shape& like, DType dtype, int64_t rows) {
  Shape s = like;
  s[0] = rows;
  t.resize(s, dtype);
}

/// The items a mask parts: the rows of X (no LoD), or the sequences of its LoD level `level`.
struct MaskedItems {
  const LoD* lod = nullptr;  // null: each row is an item
  size_t level = 0;
  int64_t count = 0;
  const bool* mask = nullptr;  // on the host
  Tensor mask_host;            // the mask (a copy when it lives on a device)

  /// The rows [first, second) of item i: its offsets followed down to the last level.
  std::pair<int64_t, int64_t> rows(int64_t i) const {
    if (!lod) return {i, i + 1};
    size_t b = size_t(i), e = size_t(i) + 1;
    for (size_t l = level; l < lod->size(); ++l) b = (*lod)[l][b], e = (*lod)[l][e];
    return {int64_t(b), int64_t(e)};
  }
  /// Rows of the items whose mask entry is `side`.
  int64_t rows_of(bool side) const {
    int64_t n = 0;
    for (int64_t i = 0; i < count; ++i)
      if (mask[i] == side) {
        auto [b, e] = rows(i);
        n += e - b;
      }
    return n;
  }
  /// The LoD of the items whose mask entry is `side`, packed in order: the levels from `level` down, each
  /// rebased to start at 0. requires: lod.
  /// ensures: a scratch LoD (seq_lod_scratch), valid until the next kernel asks for one of as many levels.
  const LoD& sub_lod(bool side) const {
    LoD& out = kernels::seq_lod_scratch(lod->size() - level);
    for (auto& o : out) o.assign(1, 0);
    for (int64_t i = 0; i < count; ++i) {
      if (mask[i] != side) continue;
      size_t b = size_t(i), e = size_t(i) + 1;
      for (size_t l = level; l < lod->size(); ++l) {
        auto& o = out[l - level];
        for (size_t j = b; j < e; ++j) o.push_back(o.back() + (*lod)[l][j + 1] - (*lod)[l][j]);
        b = (*lod)[l][b], e = (*lod)[l][e];
      }
    }
    return out;
  }
};

/// The items of X (input `xs`) and the mask (input `ms`), checked: a bool mask with one entry per item.
inline MaskedItems masked_items(const KernelContext& c, Slot xs, Slot ms, int32_t level) {
  const LoDTensor& x = c.in(xs);
  const LoDTensor& m = c.in(ms);
  c.check(x.rank() >= 1, "X ('{}') must have rows (rank >= 1), got a scalar", c.in_name(xs));
  c.check(m.dtype() == DType::boolean, "Mask ('{}') must be bool, got {}", c.in_name(ms), name(m.dtype()));
  MaskedItems it;
  it.level = size_t(level);
  it.count = x.dim(0);
  if (x.lod_level() > 0) {
    c.check(level >= 0 && level < x.lod_level(), "level {} is not a LoD level of X ('{}'), which has {}", level, c.in_name(xs), x.lod_level());
    const std::string why = lod_error(x.lod(), x.dim(0));  // "" (no allocation) unless the LoD is bad
    c.check(why.empty(), "X ('{}') {} has a bad LoD: {}", c.in_name(xs), x.shape(), why);
    it.lod = &x.lod();
    it.count = int64_t(x.lod()[it.level].size()) - 1;
  }
  c.check(m.numel() == it.count && (m.rank() == 1 || (m.rank() == 2 && m.dim(1) == 1)),
          "Mask ('{}') {} must hold one entry per {} of X ('{}') {}, which has {}", c.in_name(ms), m.shape(), it.lod ? "sequence" : "row", c.in_name(xs),
          x.shape(), it.count);
  it.mask_host = place_io::host(c, m);
  it.mask = it.mask_host.data<bool>();
  return it;
}

/// Copies the rows of the items whose mask entry is `side` between `whole` (all items, X's order) and `part`
/// (those items packed): gather when `to_part`, else scatter. `row_bytes` is the bytes of one row of either.
/// Neighbouring items on one side are neighbours in both, so each run of them is one copy.
inline void move_items(const KernelContext& c, const MaskedItems& it, bool side, const Tensor& whole, const Tensor& part, size_t row_bytes, bool to_part) {
  char* w = static_cast<char*>(whole.raw());
  char* p = static_cast<char*>(part.raw());
  size_t at = 0;  // bytes of `part` done
  auto copy = [&](int64_t b, int64_t e) {  // rows [b, e) of whole
    const size_t n = size_t(e - b) * row_bytes;
    char* wb = w + size_t(b) * row_bytes;
    if (to_part) place_io::copy(c, p + at, wb, n);
    else place_io::copy(c, wb, p + at, n);
    at += n;
  };
  int64_t run_b = 0, run_e = 0;  // the run being gathered: rows [run_b, run_e) of whole
  for (int64_t i = 0; i < it.count; ++i) {
    if (it.mask[i] != side) continue;
    auto [b, e] = it.rows(i);
    if (b != run_e) {
      copy(run_b, run_e);
      run_b = b;
    }
    run_e = e;
  }
  copy(run_b, run_e);
}

/// Writes into `part` the items of `whole` whose mask entry is `side`, with their sub-LoD when X has one.
inline void gather_side(const KernelContext& c, const MaskedItems& it, bool side, const LoDTensor& whole, LoDTensor& part) {
  resize_rows_like(part, whole.shape(), whole.dtype(), it.rows_of(side));
  move_items(c, it, side, whole, part, size_t(kernels::row_size(whole)) * size_of(whole.dtype()), true);
  if (it.lod) part.set_lod(it.sub_lod(side));
  else part.clear_lod();
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void SplitLoDTensor::eval_cpu(KernelContext& c, const Attrs& a) {
  using namespace cpu_kernels;
  const MaskedItems it = masked_items(c, x, mask, a.level);
  const LoDTensor& xt = c.in(x);
  for (bool side : {true, false}) {
    const Slot s = side ? out_true : out_false;
    if (!c.has_out(s)) continue;
    LoDTensor& o = c.out(s);
    c.check(&o != &xt, "{} ('{}') cannot be X", s.name, c.out_name(s));
    gather_side(c, it, side, xt, o);
  }
}

inline void MergeLoDTensor::eval_cpu(KernelContext& c, const Attrs& a) {
  using namespace cpu_kernels;
  const MaskedItems it = masked_items(c, x, mask, a.level);
  const LoDTensor& xt = c.in(x);
  // A side no row is taken from is not read: a branch that did not run leaves stale values of any shape.
  const int64_t rows_t = it.rows_of(true), rows_f = xt.dim(0) - rows_t;
  const LoDTensor* parts[2] = {rows_t > 0 ? &c.in(in_true) : nullptr, rows_f > 0 ? &c.in(in_false) : nullptr};
  const Slot slots[2] = {in_true, in_false};
  const int64_t rows[2] = {rows_t, rows_f};
  for (int k = 0; k < 2; ++k)
    if (parts[k])
      c.check(parts[k]->rank() >= 1 && parts[k]->dim(0) == rows[k], "{} ('{}') {} must have the {} rows of the items where Mask ('{}') is {}",
              slots[k].name, c.in_name(slots[k]), parts[k]->shape(), rows[k], c.in_name(mask), k == 0);
  if (parts[0] && parts[1])
    c.check(parts[0]->dtype() == parts[1]->dtype() && parts[0]->shape().numel(1, parts[0]->rank()) == parts[1]->shape().numel(1, parts[1]->rank()) &&
                parts[0]->rank() == parts[1]->rank(),
            "InTrue ('{}') {} {} and InFalse ('{}') {} {} must match past the rows", c.in_name(in_true), parts[0]->shape(), name(parts[0]->dtype()),
            c.in_name(in_false), parts[1]->shape(), name(parts[1]->dtype()));
  // Out's row shape: a side that is read; with no rows at all, whichever side holds a tensor, else X's.
  const Tensor* like = parts[0] ? parts[0] : parts[1];
  if (!like)
    for (Slot s : slots)
      if (const Value* v = c.in_value(s); !like && v && v->tensor_if() && v->tensor_if()->initialized() && v->tensor_if()->rank() >= 1) like = v->tensor_if();
  if (!like) like = &xt;
  LoDTensor& o = c.out(out);
  c.check(&o != &xt && &o != parts[0] && &o != parts[1], "Out ('{}') cannot be one of the inputs", c.out_name(out));
  resize_rows_like(o, like->shape(), like->dtype(), xt.dim(0));
  const size_t row_bytes = size_t(kernels::row_size(o)) * size_of(o.dtype());
  for (int k = 0; k < 2; ++k)
    if (parts[k]) move_items(c, it, k == 0, o, *parts[k], row_bytes, false);
  o.set_lod(xt.lod());
}

/// InTrue@GRAD / InFalse@GRAD: the rows of Out@GRAD where Mask is true / false, with their sub-LoD; zeros shaped
/// like the input where none is taken (the forward did not read it).
inline void MergeLoDTensor::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  using namespace cpu_kernels;
  const MaskedItems it = masked_items(c, x, mask, a.level);
  const LoDTensor& xt = c.in(x);
  const LoDTensor& dout = c.in(out_grad);
  c.check(dout.rank() >= 1 && dout.dim(0) == xt.dim(0), "Out@GRAD ('{}') {} must have the {} rows of X ('{}')", c.in_name(out_grad), dout.shape(),
          xt.dim(0), c.in_name(x));
  for (bool side : {true, false}) {
    const Slot gs = side ? in_true_grad : in_false_grad;
    if (!c.has_out(gs)) continue;
    LoDTensor& g = c.out(gs);
    c.check(&g != &dout, "{} ('{}') cannot be Out@GRAD", gs.name, c.out_name(gs));
    if (it.rows_of(side) > 0) {
      gather_side(c, it, side, dout, g);
      continue;
    }
    const Value* v = c.in_value(side ? in_true : in_false);
    const LoDTensor* in = v ? v->tensor_if() : nullptr;
    if (in && in->initialized() && in->rank() >= 1) {
      g.resize(in->shape(), dout.dtype());
      g.set_lod(in->lod());
    } else {
      resize_rows_like(g, dout.shape(), dout.dtype(), 0);
      g.clear_lod();
    }
    place_io::zero(c, g.raw(), g.bytes());
  }
}

}  // namespace oar::ops
