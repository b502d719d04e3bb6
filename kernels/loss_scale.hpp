// kernels/loss_scale.hpp: update_loss_scaling's rule for one step (ops/amp.hpp), the same on the CPU and in
// the CUDA kernel, so both places move the scale identically.
#pragma once
#include <cstdint>

#include "oar/config.hpp"

namespace oar::fn {

/// scale, good and bad after a step whose gradients were finite or not (`found`).
OAR_HD inline void next_loss_scale(bool found, float& scale, int32_t& good, int32_t& bad, int32_t incr_every, int32_t decr_every, float incr_ratio,
                                   float decr_ratio) {
  if (found) {
    good = 0;
    if (++bad >= decr_every) {
      const float s = scale * decr_ratio;
      scale = s < 1.f ? 1.f : s;  // below 1 the scale would shrink small gradients further, never help
      bad = 0;
    }
  } else {
    bad = 0;
    if (++good >= incr_every) {
      const float s = scale * incr_ratio;
      if (s - s == 0.f) scale = s;  // finite: an inf scale would make every later step overflow
      good = 0;
    }
  }
}

}  // namespace oar::fn
