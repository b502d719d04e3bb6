// oar/ops/feed_fetch.hpp: feed (copy column `col` of the feed list into a variable) and fetch (copy a variable
// into column `col` of the fetch list). The executor runs both itself.
#pragma once
#include "oar/ops/op.hpp"

namespace oar::ops {

struct Feed {
  static constexpr std::string_view type = common::feed_op;
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Attr<int32_t> col{"col"};

  static OpDef def() {
    return OpDef(type, "Out = feed_list[col]").in(x).out(out).attr(col, 0).check<int32_t>([](int v) { return v >= 0; }, "must be >= 0").no_kernel(RunBy::feed);
  }
  static void infer_shape(InferShapeContext&) {}
};

struct Fetch {
  static constexpr std::string_view type = common::fetch_op;
  static constexpr Slot x{"X"}, out{"Out"};
  static constexpr Attr<int32_t> col{"col"};

  static OpDef def() {
    return OpDef(type, "fetch_list[col] = X").in(x).out(out).attr(col, 0).check<int32_t>([](int v) { return v >= 0; }, "must be >= 0").no_kernel(RunBy::fetch);
  }
  static void infer_shape(InferShapeContext&) {}
};

}  // namespace oar::ops
