#pragma once

// Whether the machine's cores are contended by other programs, so that a
// polling link owner should sleep (arm the CQ) instead of spinning.  Not
// installed.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>

namespace rdmactor::transport {

/// The estimate behind `contention_monitor`, free of clocks and files: fed
/// with what the kernel's scheduler says of a polling thread of ours (the
/// time it ran and the time it was runnable but waited for a core, since
/// that thread's previous sample), it keeps a moving average of the
/// waiting share, wait / (run + wait).  A thread that shares its core with
/// a CPU-bound program waits most of the time it wants to run (two hogs on
/// two cores: 0.85-0.9); threads of our own that take turns wait a little
/// (two nodes of one process on two cores: 0.2-0.4), and a polling peer
/// process on a core of its own not at all.  Contended: the average at
/// least `tuning::contention_enter_share`; it ends below
/// `tuning::contention_leave_share`.
class contention_estimate {
public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::nanoseconds;

  /// One sample at `now`: a polling thread of ours ran `run` and waited
  /// `wait` for a core since its previous sample.  Samples with less than
  /// `tuning::contention_min_sample_us` of both say nothing and are
  /// skipped.  Returns `contended()`.
  bool update(time_point now, duration run, duration wait) noexcept;

  bool contended() const noexcept {
    return contended_;
  }

  /// The moving average of the waiting share (for tests and logs).
  double starved() const noexcept {
    return starved_;
  }

private:
  bool started_ = false;
  bool contended_ = false;
  time_point first_{};
  time_point last_{};
  double starved_ = 0;
};

/// One per process: at most every `tuning::contention_sample_us`, the
/// polling owner that asks first reads its own thread's scheduler
/// statistics (/proc/thread-self/schedstat) into the estimate; the others
/// read the last verdict without waiting.  Where the kernel keeps no such
/// statistics, never contended.  Thread-safe.
class contention_monitor {
public:
  /// The process's monitor.
  static contention_monitor& instance();

  /// Whether the cores are contended, as of a sample no older than the
  /// sampling period at `now` (takes one when due and nobody else is).
  bool contended(std::chrono::steady_clock::time_point now) noexcept;

  /// Switches sampling off (`false`: never contended) or on.  Off from the
  /// start when the environment sets RDMACTOR_CONTENTION=0.
  void enable(bool on) noexcept {
    enabled_.store(on, std::memory_order_relaxed);
  }

  /// Tests: every owner reads `verdict` from now on, without sampling
  /// (-1: sample again).
  void force(int verdict) noexcept {
    forced_.store(verdict, std::memory_order_relaxed);
  }

  contention_monitor(const contention_monitor&) = delete;
  contention_monitor& operator=(const contention_monitor&) = delete;

private:
  contention_monitor();

  std::atomic<bool> enabled_{true};
  std::atomic<bool> contended_{false};
  std::atomic<int64_t> next_sample_ns_{0};
  std::atomic<int> forced_{-1};
  std::mutex sampling_;
  contention_estimate estimate_;
};

} // namespace rdmactor::transport
