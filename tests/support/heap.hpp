// tests/support/heap.hpp: how many times the process called operator new (tests/main.cpp replaces it), to
// prove that a steady-state run allocates nothing on the heap, in any thread.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace oar_test {
extern std::atomic<int64_t> heap_allocations;
/// While true, every operator new prints a short backtrace to stderr (who allocates); set by tests that
/// count allocations when the environment has OAR_TEST_HEAP_TRAP=1.
extern std::atomic<bool> heap_trap;
/// The largest size one operator new asked for since it was last set to 0.
extern std::atomic<size_t> largest_allocation;

/// How many times `f()` calls operator new; with OAR_TEST_HEAP_TRAP=1 in the environment each of those calls
/// prints its backtrace.
template <class F>
int64_t allocations_during(F&& f) {
  const int64_t before = heap_allocations.load();
  const char* trap = std::getenv("OAR_TEST_HEAP_TRAP");
  heap_trap = trap && *trap == '1';
  f();
  heap_trap = false;
  return heap_allocations.load() - before;
}

/// How many allocations `measured` calls of `step` make once `warm` calls have prepared and sized everything.
template <class F>
int64_t steady_state_allocations(F&& step, int warm = 3, int measured = 5) {
  for (int i = 0; i < warm; ++i) step();
  return allocations_during([&] {
    for (int i = 0; i < measured; ++i) step();
  });
}
}  // namespace oar_test
