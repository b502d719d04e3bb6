// kernels/cpu/conv_choice.hpp: which CPU kernel computes a convolution of a given shape. Under
// ConvAlgorithm::automatic every kernel that applies is timed once on the first call with that shape (as
// cuDNN's find does), and the fastest is kept for the process; the other settings pin one kernel.
#pragma once
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/cpu/im2col.hpp"
#include "kernels/cpu/winograd.hpp"
#include "oar/device/conv_algorithm.hpp"

namespace oar::cpu_kernels {

/// The kernels behind conv2d and conv2d_grad. im2col includes the copy-free GEMM of 1x1 stride-1 windows.
enum class ConvKernel : uint8_t { im2col, winograd_large, winograd_small };

inline const char* name(ConvKernel k) {
  return k == ConvKernel::im2col ? "im2col" : k == ConvKernel::winograd_large ? "winograd 8x8 tiles" : "winograd 6x6 tiles";
}

/// The tile size of a Winograd kernel.
inline WinoTiles tiles_of(ConvKernel k) { return k == ConvKernel::winograd_large ? WinoTiles::large : WinoTiles::small; }

/// What a convolution pass computes: the forward, or the backward with the gradients it is asked for.
enum class ConvPass : uint8_t { forward, backward_dx, backward_dw, backward_both };

/// A pass over one shape: the key of the choice.
struct ConvShapeKey {
  std::array<int64_t, 17> v{};
  ConvShapeKey(ConvPass pass, int64_t elem_size, int64_t n, const ConvGeom& g, int64_t m, int64_t groups)
      : v{int64_t(pass), elem_size, n, g.c, g.h, g.w, m, groups, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.oh} {}
  bool operator<(const ConvShapeKey& o) const { return v < o.v; }
  /// "forward 16 x 64 x 56 x 56 -> 64, 3x3 stride 1 pad 1" and the like.
  std::string describe() const {
    static const char* passes[] = {"forward", "backward (input grad)", "backward (filter grad)", "backward"};
    std::string s = std::string(passes[v[0]]) + " " + std::to_string(v[2]) + " x " + std::to_string(v[3]) + " x " + std::to_string(v[4]) +
                    " x " + std::to_string(v[5]) + " -> " + std::to_string(v[6]) + ", " + std::to_string(v[8]) + "x" + std::to_string(v[9]) +
                    " stride " + std::to_string(v[10]) + " pad " + std::to_string(v[12]);
    if (v[14] != 1) s += " dilation " + std::to_string(v[14]);
    if (v[7] != 1) s += " groups " + std::to_string(v[7]);
    return s + (v[1] == 8 ? " (f64)" : "");
  }
};

namespace detail {
struct ConvChoices {
  std::mutex mu;
  std::map<ConvShapeKey, ConvKernel> chosen;
};
inline ConvChoices& conv_choices() {
  static ConvChoices c;
  return c;
}
}  // namespace detail

/// The kernels that may compute a convolution over `g` with m output channels in `groups` groups under the
/// current setting, the first being the one to use without timing. `automatic` offers Winograd tiles only
/// where both channel counts are at least 8 and the output at least 4 x 4 (with fewer, the tile transforms cost
/// more than the products they save: the book net's first layer, 1 input channel), and each tile size only
/// where its tiles cover the output with at most 50% waste (a 7 x 7 output takes 12 x 12 of 8 x 8 tiles, 2.9x
/// the work): a candidate that cannot win would still cost its timing runs and keep its scratch buffers.
inline int conv_candidates(const ConvGeom& g, int64_t m, int64_t groups, ConvKernel (&out)[3]) {
  const ConvAlgorithm a = conv_algorithm();
  const bool tiles = winograd_applies(g, m, groups);
  if (tiles && a == ConvAlgorithm::winograd) return out[0] = ConvKernel::winograd_large, 1;
  if (tiles && a == ConvAlgorithm::winograd_small) return out[0] = ConvKernel::winograd_small, 1;
  out[0] = ConvKernel::im2col;
  if (a != ConvAlgorithm::automatic || !tiles || g.c < 8 || m < 8 || g.oh < 4 || g.ow < 4) return 1;
  int nc = 1;
  for (WinoTiles t : {WinoTiles::large, WinoTiles::small}) {
    const int64_t step = wino_tile_out(t, g.kh), covered = (g.oh + step - 1) / step * step * ((g.ow + step - 1) / step * step);
    if (covered * 2 <= g.oh * g.ow * 3) out[nc++] = t == WinoTiles::large ? ConvKernel::winograd_large : ConvKernel::winograd_small;
  }
  return nc;
}

/// Runs `run(kernel)` with the kernel chosen for `key` among `cand[0, nc)`, which must leave the pass's outputs
/// complete whichever kernel it is given. The first time a key with several candidates comes, each candidate
/// runs twice (the first run pays for scratch buffers) and the fastest of its two counts; the outputs are then
/// left as the chosen kernel computes them, so every call of a shape rounds the same way.
template <class Run>
inline ConvKernel run_chosen_conv(const ConvShapeKey& key, const ConvKernel* cand, int nc, Run&& run) {
  if (nc == 1) {
    run(cand[0]);
    return cand[0];
  }
  auto& ch = detail::conv_choices();
  bool known = false;
  ConvKernel k = cand[0];
  {
    std::lock_guard<std::mutex> lock(ch.mu);  // held for the lookup only: Evaluators on many threads run convolutions at once
    if (auto it = ch.chosen.find(key); it != ch.chosen.end()) known = true, k = it->second;
  }
  if (known) {
    run(k);
    return k;
  }
  std::array<double, 3> best;
  best.fill(std::numeric_limits<double>::infinity());
  for (int rep = 0; rep < 2; ++rep)
    for (int i = 0; i < nc; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      run(cand[i]);
      best[size_t(i)] = std::min(best[size_t(i)], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  const int pick = int(std::min_element(best.begin(), best.begin() + nc) - best.begin());
  if (pick != nc - 1) run(cand[pick]);
  ConvKernel kept;
  {
    std::lock_guard<std::mutex> lock(ch.mu);
    kept = ch.chosen.emplace(key, cand[pick]).first->second;
  }
  if (kept != cand[pick]) run(kept);  // another thread timed the same shape at the same time, and came first
  return kept;
}

/// Every shape chosen for so far and its kernel, as "<shape>: <kernel>" lines (for benchmarks and tuning).
inline std::vector<std::string> conv_choice_report() {
  auto& ch = detail::conv_choices();
  std::lock_guard<std::mutex> lock(ch.mu);
  std::vector<std::string> lines;
  for (const auto& [key, k] : ch.chosen) lines.push_back(key.describe() + ": " + name(k));
  return lines;
}

/// The kernel that runs `key` now: the setting's one kernel, or the one timed fastest; "not timed yet" before the
/// shape's first call under `automatic`.
inline const char* conv_kernel_in_use(const ConvShapeKey& key, const ConvGeom& g, int64_t m, int64_t groups) {
  ConvKernel cand[3];
  if (conv_candidates(g, m, groups, cand) == 1) return name(cand[0]);
  auto& ch = detail::conv_choices();
  std::lock_guard<std::mutex> lock(ch.mu);
  const auto it = ch.chosen.find(key);
  return it == ch.chosen.end() ? "not timed yet" : name(it->second);
}

/// Forgets every choice (the next call of each shape times its candidates again).
inline void clear_conv_choices() {
  auto& ch = detail::conv_choices();
  std::lock_guard<std::mutex> lock(ch.mu);
  ch.chosen.clear();
}

}  // namespace oar::cpu_kernels
