#pragma once

#include <chrono>

namespace rdmactor::bench {

/// Blocks until SIGINT or SIGTERM arrives (installs the handlers).
void wait_for_stop_signal();

/// Blocks until SIGINT or SIGTERM arrives or `max` passed (installs the
/// handlers); returns true when a signal arrived.
bool wait_for_stop_signal(std::chrono::milliseconds max);

} // namespace rdmactor::bench
