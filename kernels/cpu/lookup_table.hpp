// kernels/cpu/lookup_table.hpp: lookup_table and lookup_table_grad (dense or SelectedRows) on the CPU.
#pragma once
#include <cstring>
#include <span>

#include "kernels/common/lookup_table.hpp"
#include "kernels/cpu/gather.hpp"
#include "oar/ops/lookup_table.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/device/thread_pool.hpp"

namespace oar::ops {

inline void LookupTable::eval_cpu(KernelContext& c, const Attrs& a) {
  const LoDTensor& wt = c.in(w);
  const LoDTensor& ids_t = c.in(ids);
  c.check(wt.rank() == 2, "W must be [V, D], got {}", wt.shape());
  const int64_t v = wt.dim(0), d = wt.dim(1), pad = kernels::padding_row(a.padding_idx, v);
  auto idv = kernels::lookup_ids(c, ids_t, v, pad);
  Shape os = ids_t.shape();
  c.check(os.rank() >= 1 && os[os.rank() - 1] == 1, "Ids must end in a dim of 1 ([N, 1]), got {}", os);
  os[os.rank() - 1] = d;
  LoDTensor& ot = c.out(out);
  c.dispatch(type_list<float, double>{}, wt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ot.resize(os, wt.dtype());
    const T* pw = wt.data<T>();
    T* po = ot.data<T>();
    parallel_for(0, int64_t(idv.size()), std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(d, 1)), [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        int64_t id = idv[size_t(i)];
        if (id == pad) std::fill_n(po + i * d, d, T(0));
        else std::copy_n(pw + id * d, d, po + i * d);
      }
    });
  });
  ot.set_lod(ids_t.lod());
}

/// Dense: W@GRAD = zeros [V, D] with W@GRAD[ids[i]] += Out@GRAD[i]. Sparse (is_sparse): W@GRAD becomes a
/// SelectedRows {rows = non-padding ids in order, height = V, value = their Out@GRAD rows}.
inline void LookupTable::eval_grad_cpu(KernelContext& c, const Attrs& a) {
  Value* gv = c.out_value(w_grad);
  if (!gv) return;
  const LoDTensor& wt = c.in(w);
  const LoDTensor& ids_t = c.in(ids);
  const LoDTensor& dout = c.in(out_grad);
  const int64_t v = wt.dim(0), d = wt.dim(1), pad = kernels::padding_row(a.padding_idx, v);
  auto idv = kernels::lookup_ids(c, ids_t, v, pad);
  c.check(dout.numel() == int64_t(idv.size()) * d, "Out@GRAD {} does not hold {} rows of {}", dout.shape(), idv.size(), d);
  c.dispatch(type_list<float, double>{}, wt.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* g = dout.data<T>();
    if (a.is_sparse) {
      // NOTE: the variable was created as a tensor (its kind comes from the forward program); Fluid's grad
      // var-type inference makes it SELECTED_ROWS, here the kernel switches the value's kind.
      if (!gv->is_selected_rows()) gv->reset();
      SelectedRows& sr = gv->selected_rows();
      sr.height = v;
      sr.rows.clear();
      for (int64_t id : idv)
        if (id != pad) sr.rows.push_back(id);
      sr.value.resize(Shape{int64_t(sr.rows.size()), d}, wt.dtype());
      T* pv = sr.value.data<T>();
      for (size_t i = 0, k = 0; i < idv.size(); ++i)
        if (idv[i] != pad) std::copy_n(g + int64_t(i) * d, d, pv + int64_t(k++) * d);
      return;
    }
    LoDTensor& dw = gv->tensor();
    dw.resize(wt.shape(), wt.dtype());
    T* pw = dw.data<T>();
    std::fill_n(pw, dw.numel(), T(0));
    // Parallel over columns: ids may repeat, columns never collide.
    parallel_for(0, d, std::max<int64_t>(1, int64_t(1 << 14) / std::max<int64_t>(1, int64_t(idv.size()))), [&](int64_t lo, int64_t hi) {
      for (size_t i = 0; i < idv.size(); ++i) {
        if (idv[i] == pad) continue;
        T* row = pw + idv[i] * d;
        const T* s = g + int64_t(i) * d;
        for (int64_t j = lo; j < hi; ++j) row[j] += s[j];
      }
    });
  });
}

}  // namespace oar::ops
