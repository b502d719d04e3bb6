// oar/ops/feed_fetch.hpp: feed (copy column `col` of the feed list into a variable) and fetch (copy a variable
// into column `col` of the fetch list). The executor runs both itself.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

struct Feed {
  static OpDef def() {
    return OpDef("feed", "Out = feed_list[col]").in("X").out("Out").attr("col", 0).check<int32_t>([](int v) { return v >= 0; }, "must be >= 0").no_kernel();
  }
  static void infer_shape(InferShapeContext&) {}
};

struct Fetch {
  static OpDef def() {
    return OpDef("fetch", "fetch_list[col] = X").in("X").out("Out").attr("col", 0).check<int32_t>([](int v) { return v >= 0; }, "must be >= 0").no_kernel();
  }
  static void infer_shape(InferShapeContext&) {}
};

}  // namespace oar::ops
