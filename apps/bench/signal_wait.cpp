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
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  while (!stop_requested)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

} // namespace rdmactor::bench
