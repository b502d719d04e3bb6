// tests/support/threads.hpp: a thread count held for the rest of one test.
#pragma once
#include <oar/oar.hpp>

namespace oar::test {

/// Runs the rest of a test on `n` threads and puts the count back, even when a check throws.
class ThreadsForTest {
 public:
  explicit ThreadsForTest(int n) : before_(num_threads()) { set_num_threads(n); }
  ~ThreadsForTest() { set_num_threads(before_); }
  ThreadsForTest(const ThreadsForTest&) = delete;
  ThreadsForTest& operator=(const ThreadsForTest&) = delete;

 private:
  int before_;
};

}  // namespace oar::test
