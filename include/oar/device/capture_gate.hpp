// oar/device/capture_gate.hpp: who may use a GPU while one thread captures a CUDA graph on it. Plain C++ (no
// CUDA header), so that the CPU-only tests check the protocol with real threads; kernels/cuda/context.cpp keeps
// one gate per device.
#pragma once
#include <condition_variable>
#include <mutex>

namespace oar::detail {

/// While a thread captures a graph on a device's stream, CUDA refuses the work of every other thread on the
/// legacy default stream (allocations, frees and synchronous copies, which oar orders there): it would depend
/// on the stream being captured, and the capture would be given up. The gate keeps that work and captures
/// apart. An executor run enters as a run; other device work outside any run (a Tensor::to, a free, a context
/// going) enters as a visit. A capture starts only in a run that is the device's one run under way while no
/// visit is inside; runs and visits that arrive while it lasts wait until it ends. try_capture never waits: a
/// refused capture runs its block op by op and is tried again at a later run, and it is refused while work that
/// waited for the last capture has not yet come in, so that a thread capturing run after run cannot keep a
/// waiting visit out.
class CaptureGate {
 public:
  /// A run starts. `wait` false for a run nested in the capture of its own thread, which would wait for itself.
  void enter_run(bool wait = true) { enter(runs_, wait); }
  void leave_run() { leave(runs_); }
  /// Device work outside any run starts; it waits while a capture is under way.
  void enter_visit() { enter(visits_, true); }
  void leave_visit() { leave(visits_); }
  /// Claims the device for a capture by the run calling it: true when that run is the only one under way, no
  /// visit is inside or waiting and no capture is under way; end_capture gives the claim back.
  bool try_capture() {
    std::lock_guard lock(mu_);
    if (runs_ != 1 || visits_ != 0 || waiting_ != 0 || capturing_) return false;
    capturing_ = true;
    return true;
  }
  void end_capture() noexcept {
    {
      std::lock_guard lock(mu_);
      capturing_ = false;
    }
    ended_.notify_all();
  }
  bool capturing() {
    std::lock_guard lock(mu_);
    return capturing_;
  }
  /// How many runs and visits are held up by the capture under way.
  int waiting() {
    std::lock_guard lock(mu_);
    return waiting_;
  }

 private:
  void enter(int& count, bool wait) {
    std::unique_lock lock(mu_);
    if (wait && capturing_) {
      ++waiting_;
      ended_.wait(lock, [&] { return !capturing_; });
      --waiting_;
    }
    ++count;
  }
  void leave(int& count) {
    std::lock_guard lock(mu_);
    --count;
  }

  std::mutex mu_;
  std::condition_variable ended_;
  int runs_ = 0, visits_ = 0, waiting_ = 0;  // waiting_: runs and visits held up by a capture
  bool capturing_ = false;
};

/// Holds a visit of `gate` (null: none) for its lifetime.
class GateVisit {
 public:
  explicit GateVisit(CaptureGate* gate) : gate_(gate) {
    if (gate_) gate_->enter_visit();
  }
  ~GateVisit() {
    if (gate_) gate_->leave_visit();
  }
  GateVisit(const GateVisit&) = delete;
  GateVisit& operator=(const GateVisit&) = delete;

 private:
  CaptureGate* gate_;
};

}  // namespace oar::detail
