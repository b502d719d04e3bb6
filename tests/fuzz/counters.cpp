// tests/fuzz/counters.cpp: GCC's edge coverage for libFuzzer. GCC instruments code with
// -fsanitize-coverage=trace-pc (one call per basic block) but not with the guards clang's libFuzzer reads;
// libFuzzer also takes any counters placed in the __libfuzzer_extra_counters section as coverage. Each block
// (hashed with the one before it, so that edges count rather than blocks) bumps one counter. The archive's own
// __sanitizer_cov_trace_pc, which only refuses to run, is made weak by CMake so that this one is linked.
// This file itself must be compiled without coverage: the hook would call itself.
#include <cstdint>

namespace {
constexpr uintptr_t kCounters = uintptr_t(1) << 16;
}

extern "C" {
__attribute__((section("__libfuzzer_extra_counters"), used)) uint8_t oar_fuzz_edge_counters[kCounters];

void __sanitizer_cov_trace_pc() {
  static thread_local uintptr_t previous;
  const uintptr_t pc = reinterpret_cast<uintptr_t>(__builtin_return_address(0));
  const uintptr_t block = (pc ^ (pc >> 15)) & (kCounters - 1);
  uint8_t& c = oar_fuzz_edge_counters[block ^ previous];
  c = uint8_t(c + 1 == 0 ? 255 : c + 1);  // saturate: a loop run 256 times is not a new edge
  previous = block >> 1;
}

// GCC's trace-cmp also reports float and double comparisons, which libFuzzer has no hooks for (it mines
// integer comparisons for values to try): ignored.
void __sanitizer_cov_trace_cmpf(float, float) {}
void __sanitizer_cov_trace_cmpd(double, double) {}
}
