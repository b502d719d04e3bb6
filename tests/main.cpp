// tests/main.cpp: the one doctest main shared by the test executables, and the replaced global operator new
// that counts heap allocations (support/heap.hpp).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <cstdlib>
#include <new>

#include <execinfo.h>
#include <unistd.h>

#include "support/heap.hpp"

std::atomic<int64_t> oar_test::heap_allocations{0};
std::atomic<bool> oar_test::heap_trap{false};
std::atomic<size_t> oar_test::largest_allocation{0};

void* operator new(std::size_t n) {
  oar_test::heap_allocations.fetch_add(1, std::memory_order_relaxed);
  for (size_t m = oar_test::largest_allocation.load(std::memory_order_relaxed); n > m;)
    if (oar_test::largest_allocation.compare_exchange_weak(m, n, std::memory_order_relaxed)) break;
  if (oar_test::heap_trap.load(std::memory_order_relaxed)) [[unlikely]] {
    static thread_local bool inside = false;  // backtrace() may allocate itself
    if (!inside) {
      inside = true;
      void* frames[8];
      const int k = backtrace(frames, 8);
      backtrace_symbols_fd(frames, k, 2);
      write(2, "----\n", 5);
      inside = false;
    }
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
// The rest of the set, so that every form pairs with these: the library's defaults already route through the
// two above, but a sanitizer build replaces the forms left out with its own and reports the mixed pairs.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return ::operator new(n, t); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
