// kernels/cpu/runtime_shape.hpp: shape and range on every place: both compute on the host (a few values) and
// store the result on the kernel's place.
#pragma once
#include <cmath>
#include <vector>

#include "kernels/cpu/place_io.hpp"
#include "oar/device/kernel_context.hpp"
#include "oar/ops/runtime_shape.hpp"

namespace oar::ops {

inline void ShapeOf::eval_cpu(KernelContext& c, const NoAttrs&) {
  const Shape& s = c.in(input).shape();
  std::vector<int32_t> dims(static_cast<size_t>(s.rank()));
  for (int i = 0; i < s.rank(); ++i) dims[size_t(i)] = int32_t(s[i]);
  LoDTensor& o = c.out(out);
  o.resize(Shape{s.rank()}, DType::i32);
  o.clear_lod();
  cpu_kernels::place_io::store(c, o, dims.data());
}

inline void Range::eval_cpu(KernelContext& c, const NoAttrs&) {
  const LoDTensor& st = c.in(start);
  for (const Slot* s : {&start, &end, &step})
    c.check(c.in(*s).numel() == 1, "{} ('{}') must hold one value, got {}", s->name, c.in_name(*s), c.in(*s).shape());
  c.dispatch(type_list<int32_t, int64_t, float, double>{}, st.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T b = cpu_kernels::place_io::host(c, st).template data<T>()[0];
    const T e = cpu_kernels::place_io::host(c, c.in(end)).template data<T>()[0];
    const T d = cpu_kernels::place_io::host(c, c.in(step)).template data<T>()[0];
    c.check(d != T(0), "Step ('{}') is 0", c.in_name(step));
    int64_t n;
    if constexpr (std::is_integral_v<T>) {
      const int64_t span = int64_t(e) - int64_t(b), dd = int64_t(d);
      n = (span > 0) != (dd > 0) || span == 0 ? 0 : (span + dd + (dd > 0 ? -1 : 1)) / dd;
    } else {
      n = std::max<int64_t>(0, int64_t(std::ceil((double(e) - double(b)) / double(d))));
    }
    c.check(n <= (int64_t(1) << 31), "Start {}, End {}, Step {} make {} values, more than a range may hold", double(b), double(e), double(d), n);
    std::vector<T> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = T(b + T(i) * d);
    LoDTensor& o = c.out(out);
    o.resize(Shape{n}, st.dtype());
    o.clear_lod();
    cpu_kernels::place_io::store(c, o, v.data());
  });
}

}  // namespace oar::ops
