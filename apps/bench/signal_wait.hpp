#pragma once

namespace rdmactor::bench {

/// Blocks until SIGINT or SIGTERM arrives (installs the handlers).
void wait_for_stop_signal();

} // namespace rdmactor::bench
