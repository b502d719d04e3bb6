// tests/support/heap.hpp: how many times the process called operator new (tests/main.cpp replaces it), to
// prove that a steady-state run allocates nothing on the heap, in any thread.
#pragma once
#include <atomic>
#include <cstdint>

namespace oar_test {
extern std::atomic<int64_t> heap_allocations;
/// While true, every operator new prints a short backtrace to stderr (who allocates); set by tests that
/// count allocations when the environment has OAR_TEST_HEAP_TRAP=1.
extern std::atomic<bool> heap_trap;
}  // namespace oar_test
