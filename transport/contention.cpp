// Whether other programs contend for the machine's cores.

#include "transport/contention.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include "common/tuning.hpp"

namespace rdmactor::transport {

bool contention_estimate::update(time_point now, uint32_t runnable,
                                 std::chrono::nanoseconds own_cpu) noexcept {
  if (!started_) {
    started_ = true;
    first_ = now;
    last_ = now;
    last_cpu_ = own_cpu;
    return contended_;
  }
  if (now <= last_)
    return contended_;
  auto dt = std::chrono::duration<double>(now - last_).count();
  auto busy = std::max(
      std::chrono::duration<double>(own_cpu - last_cpu_).count() / dt, 0.0);
  if (last_ == first_) {
    // The first interval: the averages start from it.
    runnable_ = runnable;
    own_ = busy;
  } else {
    // A moving average over about tuning::contention_window_ms, whatever
    // the spacing of the samples.
    auto alpha = 1.0 - std::exp(-dt * 1000.0 / tuning::contention_window_ms);
    runnable_ += alpha * (runnable - runnable_);
    own_ += alpha * (busy - own_);
  }
  last_ = now;
  last_cpu_ = own_cpu;
  // No verdict before the averages span a window.
  if (now - first_ < std::chrono::milliseconds{tuning::contention_window_ms})
    return contended_;
  auto threshold = contended_ ? tuning::contention_leave_cores
                              : tuning::contention_enter_cores;
  contended_ = runnable_ > cores_ && foreign() >= threshold;
  return contended_;
}

double contention_estimate::foreign() const noexcept {
  return std::min(runnable_, static_cast<double>(cores_)) - own_;
}

namespace {

/// The cores this process may run on.
uint32_t usable_cores() noexcept {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    auto n = CPU_COUNT(&set);
    if (n > 0)
      return static_cast<uint32_t>(n);
  }
  auto n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<uint32_t>(n) : 1;
}

std::chrono::nanoseconds process_cpu() noexcept {
  timespec ts{};
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
    return std::chrono::nanoseconds{0};
  return std::chrono::seconds{ts.tv_sec} + std::chrono::nanoseconds{ts.tv_nsec};
}

} // namespace

contention_monitor& contention_monitor::instance() {
  static contention_monitor monitor;
  return monitor;
}

contention_monitor::contention_monitor() : estimate_(usable_cores()) {
  fd_ = ::open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
  if (auto* v = std::getenv("RDMACTOR_CONTENTION"); v != nullptr && *v == '0')
    enabled_.store(false, std::memory_order_relaxed);
}

contention_monitor::~contention_monitor() {
  if (fd_ >= 0)
    ::close(fd_);
}

int contention_monitor::read_runnable() noexcept {
  if (fd_ < 0)
    return -1;
  // "0.71 1.22 1.43 2/345 12345": the fourth field's numerator.
  char buf[128];
  auto n = ::pread(fd_, buf, sizeof(buf) - 1, 0);
  if (n <= 0)
    return -1;
  buf[n] = '\0';
  int fields = 0;
  for (char* p = buf; *p != '\0'; ++p) {
    if (*p == ' ' && ++fields == 3) {
      char* end = nullptr;
      auto v = std::strtol(p + 1, &end, 10);
      return end != p + 1 && *end == '/' && v >= 0 ? static_cast<int>(v) : -1;
    }
  }
  return -1;
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
  auto runnable = read_runnable();
  if (runnable < 0) {
    enabled_.store(false, std::memory_order_relaxed);
    contended_.store(false, std::memory_order_relaxed);
    return false;
  }
  auto verdict
      = estimate_.update(now, static_cast<uint32_t>(runnable), process_cpu());
  contended_.store(verdict, std::memory_order_relaxed);
  return verdict;
}

} // namespace rdmactor::transport
