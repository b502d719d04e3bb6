// kernels/common/cross_entropy.hpp: what the kernels of cross_entropy and softmax_with_cross_entropy start from
// on every place: the probabilities (or logits) as [rows, classes], the labels checked against them.
#pragma once
#include <string_view>

#include "oar/device/kernel_context.hpp"

namespace oar::kernels::xent {

/// X as rows (all dims but the last) of `d` classes (the last dim).
struct Rows {
  int64_t n, d;
};
inline Rows rows_of(const Shape& s) {
  const int64_t d = s.rank() > 0 ? s[s.rank() - 1] : 1;
  return {s.rank() > 1 ? s.numel(0, s.rank() - 1) : 1, d};
}

/// `x` (named `x_name` in messages: X, Logits, Softmax) as rows, with `label` checked against it: soft labels
/// shaped like x and of its dtype, hard ones a class index per row (each place then reads or checks their
/// values and dtype itself). A gradient's kernels pass `g` (Y@GRAD, Loss@GRAD), which must hold one value per row.
/// infer_shape checks the same when the program is built; a dim unknown then is checked here.
inline Rows check_operands(const KernelContext& c, const LoDTensor& x, std::string_view x_name, const LoDTensor& label, bool soft,
                           const LoDTensor* g = nullptr, std::string_view g_name = {}) {
  const Rows r = rows_of(x.shape());
  if (g) c.check(g->numel() == r.n, "{} {} must hold one value per row of {} {}", g_name, g->shape(), x_name, x.shape());
  if (soft)
    c.check(label.shape() == x.shape() && label.dtype() == x.dtype(), "soft_label needs Label {} {} shaped like {} {} {}", name(label.dtype()),
            label.shape(), x_name, name(x.dtype()), x.shape());
  else
    c.check(label.numel() == r.n, "Label {} must hold one class index per row ({} rows)", label.shape(), r.n);
  return r;
}

}  // namespace oar::kernels::xent
