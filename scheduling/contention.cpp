// Whether other programs contend for the machine's cores.

#include "scheduling/contention.hpp"

#include <cmath>
#include <cstdlib>

#include <fcntl.h>
#include <unistd.h>

#include "common/tuning.hpp"

namespace rdmactor::transport {

bool contention_estimate::update(time_point now, duration run,
                                 duration wait) noexcept {
  auto wanted = run + wait;
  if (wanted < std::chrono::microseconds{tuning::contention_min_sample_us}
      || run.count() < 0 || wait.count() < 0)
    return contended_;
  auto share
      = static_cast<double>(wait.count()) / static_cast<double>(wanted.count());
  if (!started_) {
    started_ = true;
    first_ = now;
    last_ = now;
    starved_ = share;
    return contended_;
  }
  if (now > last_) {
    // A moving average over about tuning::contention_window_ms, whatever
    // the spacing of the samples.
    auto dt = std::chrono::duration<double, std::milli>(now - last_).count();
    auto alpha = 1.0 - std::exp(-dt / tuning::contention_window_ms);
    starved_ += alpha * (share - starved_);
    last_ = now;
  }
  // No verdict before the average spans a window.
  if (now - first_ < std::chrono::milliseconds{tuning::contention_window_ms})
    return contended_;
  contended_ = starved_ >= (contended_ ? tuning::contention_leave_share
                                       : tuning::contention_enter_share);
  return contended_;
}

namespace {

/// This thread's scheduler statistics: /proc/thread-self/schedstat ("run
/// wait slices", nanoseconds), opened once per thread, and the values of
/// its previous reading.
struct thread_schedstat {
  int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  bool read_before = false;
  int64_t run = 0;
  int64_t wait = 0;

  ~thread_schedstat() {
    if (fd >= 0)
      ::close(fd);
  }

  /// Reads the statistics; false when the kernel keeps none.
  bool read(int64_t& run_ns, int64_t& wait_ns) noexcept {
    if (fd < 0)
      return false;
    char buf[96];
    auto n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0)
      return false;
    buf[n] = '\0';
    char* end = nullptr;
    run_ns = std::strtoll(buf, &end, 10);
    if (end == buf)
      return false;
    char* end2 = nullptr;
    wait_ns = std::strtoll(end, &end2, 10);
    return end2 != end;
  }
};

} // namespace

contention_monitor& contention_monitor::instance() {
  static contention_monitor monitor;
  return monitor;
}

contention_monitor::contention_monitor() {
  if (auto* v = std::getenv("RDMACTOR_CONTENTION"); v != nullptr && *v == '0')
    enabled_.store(false, std::memory_order_relaxed);
}

bool contention_monitor::contended(
    std::chrono::steady_clock::time_point now) noexcept {
  if (auto f = forced_.load(std::memory_order_relaxed); f >= 0)
    return f != 0;
  if (!enabled_.load(std::memory_order_relaxed))
    return false;
  auto now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    now.time_since_epoch())
                    .count();
  if (now_ns < next_sample_ns_.load(std::memory_order_relaxed)
      || !sampling_.try_lock())
    return contended_.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> guard{sampling_, std::adopt_lock};
  if (now_ns < next_sample_ns_.load(std::memory_order_relaxed))
    return contended_.load(std::memory_order_relaxed);
  next_sample_ns_.store(now_ns + int64_t{tuning::contention_sample_us} * 1000,
                        std::memory_order_relaxed);
  thread_local thread_schedstat mine;
  int64_t run = 0;
  int64_t wait = 0;
  if (!mine.read(run, wait)) {
    // No statistics on this kernel: never contended.
    enabled_.store(false, std::memory_order_relaxed);
    contended_.store(false, std::memory_order_relaxed);
    return false;
  }
  bool verdict = contended_.load(std::memory_order_relaxed);
  if (mine.read_before)
    verdict = estimate_.update(now, std::chrono::nanoseconds{run - mine.run},
                               std::chrono::nanoseconds{wait - mine.wait});
  mine.read_before = true;
  mine.run = run;
  mine.wait = wait;
  contended_.store(verdict, std::memory_order_relaxed);
  return verdict;
}

} // namespace rdmactor::transport
