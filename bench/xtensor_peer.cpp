// bench/xtensor_peer.cpp: the N-D kernels oar hand-writes (transpose, slice, concat, gather, an axis
// reduction, a broadcast add) written as xtensor expressions evaluated into preallocated buffers: the peer
// that says whether oar's kernels should move onto xtensor (oar_bench's nd group).
#include "common.hpp"

#if defined(OAR_BENCH_XTENSOR)
#include <xtensor/xadapt.hpp>
#include <xtensor/xbuilder.hpp>
#include <xtensor/xmanipulation.hpp>
#include <xtensor/xreducer.hpp>
#include <xtensor/xview.hpp>
#endif

namespace bench::xtensor_peer {

#if defined(OAR_BENCH_XTENSOR)
bool available() { return true; }

namespace {
using shape_t = std::vector<size_t>;
size_t numel(const shape_t& s) {
  size_t n = 1;
  for (size_t d : s) n *= d;
  return n;
}
auto view_of(const float* p, const shape_t& s) { return xt::adapt(const_cast<float*>(p), numel(s), xt::no_ownership(), s); }
auto view_of(float* p, const shape_t& s) { return xt::adapt(p, numel(s), xt::no_ownership(), s); }
shape_t to_shape(const std::vector<int64_t>& v) { return shape_t(v.begin(), v.end()); }
}  // namespace

std::unique_ptr<Runner> nd(const NdCase& c) {
  auto r = std::make_unique<FnRunner>();
  const shape_t xs = to_shape(c.x_shape), ys = to_shape(c.y_shape), os = to_shape(c.out_shape);
  auto out = std::make_shared<std::vector<float>>(numel(os));
  const float *x = c.x, *y = c.y;
  if (c.kind == "transpose") {
    std::vector<size_t> perm(c.ints.begin(), c.ints.end());
    r->on_step = [=] { view_of(out->data(), os) = xt::transpose(view_of(x, xs), perm); };
  } else if (c.kind == "slice") {  // ints: axis 1 from ints[0] to ints[1], rank 3
    const size_t lo = size_t(c.ints[0]), hi = size_t(c.ints[1]);
    r->on_step = [=] { view_of(out->data(), os) = xt::view(view_of(x, xs), xt::all(), xt::range(lo, hi), xt::all()); };
  } else if (c.kind == "concat") {  // along ints[0]
    const size_t axis = size_t(c.ints[0]);
    r->on_step = [=] { view_of(out->data(), os) = xt::concatenate(xt::xtuple(view_of(x, xs), view_of(y, ys)), axis); };
  } else if (c.kind == "gather") {  // rows idx of a 2-D x
    std::vector<size_t> idx(c.ints.begin(), c.ints.end());
    r->on_step = [=] { view_of(out->data(), os) = xt::view(view_of(x, xs), xt::keep(idx), xt::all()); };
  } else if (c.kind == "reduce_sum") {  // over axis ints[0]
    const size_t axis = size_t(c.ints[0]);
    r->on_step = [=] { view_of(out->data(), os) = xt::sum(view_of(x, xs), {axis}); };
  } else if (c.kind == "broadcast_add") {  // y shaped to broadcast (e.g. [C, 1, 1] against [N, C, H, W])
    r->on_step = [=] { view_of(out->data(), os) = view_of(x, xs) + view_of(y, ys); };
  } else {
    return nullptr;
  }
  return r;
}
#else
bool available() { return false; }
std::unique_ptr<Runner> nd(const NdCase&) { return nullptr; }
#endif

}  // namespace bench::xtensor_peer
