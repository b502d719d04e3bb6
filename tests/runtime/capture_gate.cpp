// tests/runtime/capture_gate.cpp: the protocol that keeps a CUDA graph capture apart from the rest of a
// device's work (detail::CaptureGate), checked with real threads: it is plain C++, so it runs without a GPU.
#include "pch.hpp"

#include <oar/device/capture_gate.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

using oar::detail::CaptureGate;
using oar::detail::GateVisit;
using namespace std::chrono_literals;

TEST_CASE("capture gate: a capture starts only in the device's one run under way, with no visit inside and none under way") {
  CaptureGate gate;
  CHECK_FALSE(gate.try_capture());  // no run at all
  gate.enter_run();
  gate.enter_run();
  CHECK_FALSE(gate.try_capture());  // two runs
  gate.leave_run();
  {
    const GateVisit visit(&gate);
    CHECK_FALSE(gate.try_capture());  // device work outside runs is under way
  }
  CHECK(gate.try_capture());
  CHECK(gate.capturing());
  CHECK_FALSE(gate.try_capture());  // one capture at a time
  gate.enter_run(false);            // a run nested in the capture does not wait for it
  gate.leave_run();
  gate.end_capture();
  CHECK_FALSE(gate.capturing());
  CHECK(gate.try_capture());
  gate.end_capture();
  gate.leave_run();
  const GateVisit none(nullptr);  // work inside a run of its own thread visits no gate
  gate.enter_run();
  CHECK(gate.try_capture());
  gate.end_capture();
  gate.leave_run();
}

TEST_CASE("capture gate: runs and visits that arrive during a capture wait until it ends") {
  CaptureGate gate;
  gate.enter_run();
  REQUIRE(gate.try_capture());
  std::atomic<bool> visited{false}, ran{false};
  std::thread visitor([&] {
    const GateVisit visit(&gate);
    visited = true;
  });
  std::thread runner([&] {
    gate.enter_run();
    ran = true;
    gate.leave_run();
  });
  // Until both wait for the capture, or one got in (which the checks below report).
  while (gate.waiting() < 2 && !visited && !ran) std::this_thread::sleep_for(100us);
  CHECK_FALSE(visited.load());
  CHECK_FALSE(ran.load());
  gate.end_capture();
  visitor.join();
  runner.join();
  CHECK(visited.load());
  CHECK(ran.load());
  gate.leave_run();
}

TEST_CASE("capture gate: a visit that waited for a capture comes in before the capturing thread's next capture") {
  // The capturing thread, freed of its capture, asks for the next one at once; the visit woken by the end of
  // the first is still waiting, or inside (it stays until told to go): either way no capture may start.
  for (int round = 0; round < 20; ++round) {
    CaptureGate gate;
    gate.enter_run();
    REQUIRE(gate.try_capture());
    std::atomic<bool> inside{false}, go{false};
    std::thread visitor([&] {
      const GateVisit visit(&gate);
      inside = true;
      while (!go) std::this_thread::sleep_for(100us);
    });
    while (gate.waiting() == 0 && !inside) std::this_thread::sleep_for(100us);  // until the visitor waits for the capture
    CHECK_FALSE(inside.load());
    gate.end_capture();
    const bool again = gate.try_capture();
    CHECK_FALSE(again);
    if (again) gate.end_capture();  // so that the visitor comes in and the case ends
    go = true;
    visitor.join();
    CHECK(gate.try_capture());  // the visit is over
    gate.end_capture();
    gate.leave_run();
  }
}

TEST_CASE("capture gate: under contention no run or visit of another thread is ever inside a capture, and captures still happen") {
  CaptureGate gate;
  std::atomic<int> visits_inside{0}, runs_inside{0};
  std::atomic<bool> capturing{false}, stop{false};
  std::atomic<int> overlaps{0}, captures{0}, refused{0}, visits{0}, runs{0};
  std::vector<std::thread> others;
  for (int t = 0; t < 3; ++t)
    others.emplace_back([&, t] {
      while (!stop) {
        if (t == 0) {  // a run, as an Evaluator's
          gate.enter_run();
          ++runs_inside;
          if (capturing) ++overlaps;
          std::this_thread::sleep_for(20us);
          --runs_inside;
          gate.leave_run();
          ++runs;
        } else {  // a Tensor::to, a free
          {
            const GateVisit visit(&gate);
            ++visits_inside;
            if (capturing) ++overlaps;
            std::this_thread::sleep_for(10us);
            --visits_inside;
          }
          ++visits;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50 * (t + 1)));
      }
    });
  const auto end = std::chrono::steady_clock::now() + 400ms;
  while (std::chrono::steady_clock::now() < end) {  // the training thread: every run tries to capture
    gate.enter_run();
    ++runs_inside;
    if (gate.try_capture()) {
      capturing = true;
      if (visits_inside != 0 || runs_inside != 1) ++overlaps;
      std::this_thread::sleep_for(100us);  // queueing the captured kernels
      if (visits_inside != 0 || runs_inside != 1) ++overlaps;
      capturing = false;
      gate.end_capture();
      ++captures;
    } else {
      ++refused;
    }
    --runs_inside;
    gate.leave_run();
  }
  stop = true;
  for (auto& t : others) t.join();
  CHECK(overlaps == 0);
  CHECK(captures > 10);
  CHECK(runs > 10);
  CHECK(visits > 10);
  MESSAGE("captures ", captures.load(), ", refused ", refused.load(), ", other runs ", runs.load(), ", visits ", visits.load());
}
