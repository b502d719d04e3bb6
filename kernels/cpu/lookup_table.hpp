// kernels/cpu/lookup_table.hpp: lookup_table and lookup_table_grad (dense or SelectedRows) on the CPU.
#pragma once
#include <cstring>

#include "kernels/cpu/gather.hpp"
#include "oar/ops/lookup_table.hpp"
#include "oar/runtime/kernel_context.hpp"
#include "oar/runtime/thread_pool.hpp"

namespace oar::cpu_kernels {

/// padding_idx as a row of a table of `v` rows: -1 (none) stays -1, another negative p becomes v + p.
inline int64_t padding_row(const KernelContext& c, int64_t v) {
  int64_t p = c.attr<int64_t>("padding_idx");
  return p == -1 ? -1 : p < 0 ? v + p : p;
}

/// The ids, checked against [0, V) except the padding id.
inline std::vector<int64_t> lookup_ids(const KernelContext& c, const Tensor& ids, int64_t v, int64_t pad) {
  c.check(ids.dtype() == DType::i64, "Ids must be i64, got {}", name(ids.dtype()));
  const int64_t* p = ids.data<int64_t>();
  std::vector<int64_t> out(p, p + ids.numel());
  for (size_t i = 0; i < out.size(); ++i)
    c.check((out[i] >= 0 && out[i] < v) || out[i] == pad, "Ids[{}] = {} is out of range [0, {}) (the rows of W)", i, out[i], v);
  return out;
}

}  // namespace oar::cpu_kernels

namespace oar::ops {

inline void LookupTable::eval_cpu(KernelContext& c) {
  const LoDTensor& w = c.in("W");
  const LoDTensor& ids_t = c.in("Ids");
  c.check(w.rank() == 2, "W must be [V, D], got {}", w.shape());
  const int64_t v = w.dim(0), d = w.dim(1), pad = cpu_kernels::padding_row(c, v);
  auto ids = cpu_kernels::lookup_ids(c, ids_t, v, pad);
  Shape os = ids_t.shape();
  c.check(os.rank() >= 1 && os[os.rank() - 1] == 1, "Ids must end in a dim of 1 ([N, 1]), got {}", os);
  os[os.rank() - 1] = d;
  LoDTensor& out = c.out("Out");
  c.dispatch(type_list<float, double>{}, w.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    out.resize(os, w.dtype());
    const T* pw = w.data<T>();
    T* po = out.data<T>();
    parallel_for(0, int64_t(ids.size()), std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(d, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        int64_t id = ids[size_t(i)];
        if (id == pad) std::fill_n(po + i * d, d, T(0));
        else std::copy_n(pw + id * d, d, po + i * d);
      }
    });
  });
  out.set_lod(ids_t.lod());
}

/// Dense: W@GRAD = zeros [V, D] with W@GRAD[ids[i]] += Out@GRAD[i]. Sparse (is_sparse): W@GRAD becomes a
/// SelectedRows {rows = non-padding ids in order, height = V, value = their Out@GRAD rows}.
inline void LookupTable::eval_grad_cpu(KernelContext& c) {
  Value* gv = c.out_value("W@GRAD");
  if (!gv) return;
  const LoDTensor& w = c.in("W");
  const LoDTensor& ids_t = c.in("Ids");
  const LoDTensor& dout = c.in("Out@GRAD");
  const int64_t v = w.dim(0), d = w.dim(1), pad = cpu_kernels::padding_row(c, v);
  auto ids = cpu_kernels::lookup_ids(c, ids_t, v, pad);
  c.check(dout.numel() == int64_t(ids.size()) * d, "Out@GRAD {} does not hold {} rows of {}", dout.shape(), ids.size(), d);
  c.dispatch(type_list<float, double>{}, w.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* g = dout.data<T>();
    if (c.attr<bool>("is_sparse")) {
      // NOTE: the variable was created as a tensor (its kind comes from the forward program); Fluid's grad
      // var-type inference makes it SELECTED_ROWS, here the kernel switches the value's kind.
      if (!gv->is_selected_rows()) gv->reset();
      SelectedRows& sr = gv->selected_rows();
      sr.height = v;
      sr.rows.clear();
      for (int64_t id : ids)
        if (id != pad) sr.rows.push_back(id);
      sr.value.resize(Shape{int64_t(sr.rows.size()), d}, w.dtype());
      T* pv = sr.value.data<T>();
      for (size_t i = 0, k = 0; i < ids.size(); ++i)
        if (ids[i] != pad) std::copy_n(g + int64_t(i) * d, d, pv + int64_t(k++) * d);
      return;
    }
    LoDTensor& dw = gv->tensor();
    dw.resize(w.shape(), w.dtype());
    T* pw = dw.data<T>();
    std::fill_n(pw, dw.numel(), T(0));
    // Parallel over columns: ids may repeat, columns never collide.
    parallel_for(0, d, std::max<int64_t>(1, int64_t(1 << 14) / std::max<int64_t>(1, int64_t(ids.size()))), [&](int64_t lo, int64_t hi) {
      for (size_t i = 0; i < ids.size(); ++i) {
        if (ids[i] == pad) continue;
        T* row = pw + ids[i] * d;
        const T* s = g + int64_t(i) * d;
        for (int64_t j = lo; j < hi; ++j) row[j] += s[j];
      }
    });
  });
}

}  // namespace oar::ops
