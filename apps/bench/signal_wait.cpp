#include "apps/bench/signal_wait.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <mutex>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

namespace rdmactor::bench {

namespace {

std::atomic<bool> stop_requested{false};

/// The handler writes a byte into this pipe (write is async-signal-safe)
/// so that the waiting thread sleeps in poll until a signal or its
/// deadline: an idle --listen server wakes for nothing (its own idle CPU
/// is what it reports).
int wake_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int) {
  stop_requested = true;
  if (wake_pipe[1] >= 0) {
    auto saved = errno;
    char c = 1;
    [[maybe_unused]] auto n = ::write(wake_pipe[1], &c, 1);
    errno = saved;
  }
}

void install_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (::pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
      wake_pipe[0] = wake_pipe[1] = -1;
    std::signal(SIGINT, on_stop_signal);
    std::signal(SIGTERM, on_stop_signal);
  });
}

} // namespace

void wait_for_stop_signal() {
  while (!wait_for_stop_signal(std::chrono::milliseconds(60000)))
    ; // again
}

bool wait_for_stop_signal(std::chrono::milliseconds max) {
  install_handlers();
  using clock = std::chrono::steady_clock;
  auto deadline = clock::now() + max;
  while (!stop_requested) {
    // Rounded up: the wait never ends before the deadline (callers time
    // their reports by it).
    auto left
        = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() <= 0)
      break;
    auto ms = static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
    if (wake_pipe[0] < 0) {
      // No pipe: poll the flag every 10 ms.
      ::poll(nullptr, 0, std::min(10, ms));
      continue;
    }
    pollfd p{wake_pipe[0], POLLIN, 0};
    ::poll(&p, 1, ms);
  }
  return stop_requested;
}

} // namespace rdmactor::bench
