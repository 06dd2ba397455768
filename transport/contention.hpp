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
/// with samples of the machine's runnable threads (the running count of
/// /proc/loadavg: running or waiting for a core) and of this process's CPU
/// time, it keeps moving averages of both.  With more runnable threads
/// than cores every core is busy, and what this process does not use of
/// them goes to other programs.  Contended: all cores busy and at least
/// `tuning::contention_enter_cores` of them other programs' on average;
/// it ends below `tuning::contention_leave_cores` or when the cores
/// suffice.  Our own threads never count, however many wait: two nodes of
/// one process on two cores keep polling.
class contention_estimate {
public:
  using time_point = std::chrono::steady_clock::time_point;

  /// For a process that may run on `cores` cores (at least 1).
  explicit contention_estimate(uint32_t cores) noexcept
      : cores_(cores == 0 ? 1 : cores) {}

  /// One sample at `now`: `runnable` threads on the machine (running or
  /// waiting for a core, the sampling thread included) and `own_cpu`, this
  /// process's CPU time since it started.  Returns `contended()`.
  bool update(time_point now, uint32_t runnable,
              std::chrono::nanoseconds own_cpu) noexcept;

  bool contended() const noexcept {
    return contended_;
  }

  /// The moving averages: runnable threads and the cores this process
  /// keeps busy (for tests and logs).
  double runnable() const noexcept {
    return runnable_;
  }
  double own() const noexcept {
    return own_;
  }
  /// The cores other programs keep busy, on average, when all are busy.
  double foreign() const noexcept;

private:
  uint32_t cores_;
  bool started_ = false;
  bool contended_ = false;
  time_point first_{};
  time_point last_{};
  std::chrono::nanoseconds last_cpu_{0};
  double runnable_ = 0;
  double own_ = 0;
};

/// One per process: samples the machine at most every
/// `tuning::contention_sample_us` for whichever polling link owner asks
/// first (the others read the last verdict without waiting), and says
/// whether spinning now takes cores from other programs.  Where
/// /proc/loadavg cannot be read, never contended.  Thread-safe.
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
  ~contention_monitor();

  /// The running count of /proc/loadavg, or -1.
  int read_runnable() noexcept;

  int fd_ = -1;
  std::atomic<bool> enabled_{true};
  std::atomic<bool> contended_{false};
  std::atomic<int64_t> next_sample_ns_{0};
  std::atomic<int> forced_{-1};
  std::mutex sampling_;
  contention_estimate estimate_;
};

} // namespace rdmactor::transport
