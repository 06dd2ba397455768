#include "apps/bench/signal_wait.hpp"

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

namespace rdmactor::bench {

namespace {

std::atomic<bool> stop_requested{false};

extern "C" void on_stop_signal(int) {
  stop_requested = true;
}

} // namespace

void wait_for_stop_signal() {
  while (!wait_for_stop_signal(std::chrono::milliseconds(100)))
    ; // again
}

bool wait_for_stop_signal(std::chrono::milliseconds max) {
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  auto deadline = std::chrono::steady_clock::now() + max;
  while (!stop_requested && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return stop_requested;
}

} // namespace rdmactor::bench
