// oar/ops/matmul.hpp: matmul, Fluid's (batched) matrix product with optional transposes and a scale alpha:
// 1-D operands are promoted to matrices, rank > 2 operands are batches, a rank-2 operand is shared by every batch.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

/// One operand as Fluid's MatDescriptor: `batch` matrices (0 when the operand is a single matrix) of
/// `rows` x `cols` as stored; `height` x `width` after the transpose.
struct MatDesc {
  int64_t batch = 0, rows = 0, cols = 0;
  bool trans = false;
  int64_t height() const { return trans ? cols : rows; }
  int64_t width() const { return trans ? rows : cols; }
};

/// x of rank 1 is a row [1, K], y of rank 1 a column [K, 1]; rank >= 3 multiplies the leading dims into batch.
inline MatDesc mat_desc(const Shape& s, bool trans, bool is_x) {
  MatDesc d;
  d.trans = trans;
  int r = s.rank();
  if (r == 1) {
    d.rows = is_x ? 1 : s[0];
    d.cols = is_x ? s[0] : 1;
    return d;
  }
  d.rows = s[r - 2], d.cols = s[r - 1];
  if (r > 2) d.batch = s.numel(0, r - 2);
  return d;
}

/// Out's shape: the batch dims of the batched operand (X's when both are), then height(X), width(Y); a 1-D X
/// drops the row dim, a 1-D Y the column dim; [1] when nothing is left. "" or why the shapes do not multiply.
/// x: [B, M, K], y: [K, N] -> [B, M, N].   x: [K], y: [K] -> [1].   x: [B, M, K], y: [K] -> [B, M].
inline std::string matmul_shape(const Shape& x, const Shape& y, bool tx, bool ty, Shape& out) {
  if (x.rank() < 1 || y.rank() < 1) return fmt::format("X {} and Y {} must have rank >= 1", x.str(), y.str());
  MatDesc dx = mat_desc(x, tx, true), dy = mat_desc(y, ty, false);
  if (!dims_compatible(dx.width(), dy.height()))
    return fmt::format("X {}{} has {} columns but Y {}{} has {} rows", x.str(), tx ? " (transposed)" : "", dx.width(), y.str(),
                       ty ? " (transposed)" : "", dy.height());
  if (dx.batch != 0 && dy.batch != 0 && !dims_compatible(dx.batch, dy.batch))
    return fmt::format("the batch of X {} ({}) differs from the batch of Y {} ({})", x.str(), dx.batch, y.str(), dy.batch);
  std::vector<int64_t> d;
  if (dx.batch != 0) d.assign(x.begin(), x.end() - 2);
  else if (dy.batch != 0) d.assign(y.begin(), y.end() - 2);
  d.push_back(dx.height());
  d.push_back(dy.width());
  if (x.rank() == 1 && d[d.size() - 2] == 1) {
    std::swap(d[d.size() - 1], d[d.size() - 2]);
    d.pop_back();
  }
  if (y.rank() == 1 && d.back() == 1) d.pop_back();
  if (d.empty()) d.push_back(1);
  out = Shape(std::move(d));
  return {};
}

/// out = alpha * op(x) * op(y), op(m) = m^T when transposed, per batch.
/// x: [..., M, K], y: [..., K, N] -> [..., M, N] (see matmul_shape for the 1-D and broadcast forms).
struct Matmul {
  static constexpr std::string_view type = "matmul";
  static constexpr Slot x{"X"}, y{"Y"}, out{"Out"};
  static constexpr Slot x_grad{"X@GRAD"}, y_grad{"Y@GRAD"}, out_grad{"Out@GRAD"};
  static constexpr Attr<bool> transpose_x{"transpose_X"}, transpose_y{"transpose_Y"};
  static constexpr Attr<float> alpha{"alpha"};
  struct Attrs {
    bool transpose_x, transpose_y;
    float alpha;
    explicit Attrs(const AttrReader& r)
        : transpose_x(r(Matmul::transpose_x)), transpose_y(r(Matmul::transpose_y)), alpha(r(Matmul::alpha)) {}
  };
  static OpDef def() {
    return OpDef(type, "Out = alpha * op(X) * op(Y), batched over leading dims")
        .in(x).in(y).out(out)
        .attr(transpose_x, false).attr(transpose_y, false).attr(alpha, 1.0f);
  }
  static void infer_shape(InferShapeContext& c) {
    c.check(is_float(c.dtype(x)), "X must be a floating-point tensor, got {}", name(c.dtype(x)));
    c.check(c.dtype(x) == c.dtype(y), "X is {} but Y is {}", name(c.dtype(x)), name(c.dtype(y)));
    Shape os;
    std::string why = matmul_shape(c.shape(x), c.shape(y), c.attr(transpose_x), c.attr(transpose_y), os);
    c.check(why.empty(), "{}", why);
    c.set_output(out, os, c.dtype(x));
  }
  /// matmul_grad(X, Y, Out@GRAD) -> X@GRAD, Y@GRAD (a shared rank-2 operand gets the sum over the batch)
  static std::vector<Operator> grad(const GradContext& g) { return {g.default_grad(false)}; }
  static void eval_cpu(KernelContext&, const Attrs&);       // kernels/cpu/matmul.hpp
  static void eval_cuda(KernelContext&, const Attrs&);      // kernels/cuda/nn.hpp
  static void eval_grad_cpu(KernelContext&, const Attrs&);  // kernels/cpu/matmul.hpp
  static void eval_grad_cuda(KernelContext&, const Attrs&);  // kernels/cuda/nn.hpp
};

}  // namespace oar::ops
