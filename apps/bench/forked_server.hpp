#pragma once

#include <cstdint>
#include <functional>
#include <sys/types.h>

#include <caf/expected.hpp>

namespace rdmactor::bench {

/// A baseline's server process, forked before the bench has threads.
struct forked_server {
  pid_t pid = -1;
  uint16_t port = 0;
  /// Closing it tells the child to shut down.
  int control_fd = -1;
};

/// Forks a child that runs `child(port_fd, control_fd)` and exits with its
/// result: the child writes the port it serves on (a `uint16_t`, 0 on
/// failure) to `port_fd` and serves until `control_fd` reads end of file
/// (the parent closed it, or died).  Returns once the port arrived (at
/// most 10 s).  Call before this process creates threads.  `what` names
/// the server in errors.
caf::expected<forked_server> fork_server_process(
    const char* what,
    const std::function<int(int port_fd, int control_fd)>& child);

/// In the child: writes the port it serves on (0: it could not serve) to
/// `port_fd` and closes it; false when the write failed.
bool report_port(int port_fd, uint16_t port);

/// In the child: blocks until the parent closes its end of `control_fd`
/// (`stop_forked_server`) or dies.
void wait_for_parent(int control_fd);

/// Tells the child to shut down and waits for it (bounded: 5 s, then
/// SIGKILL).
void stop_forked_server(forked_server& srv);

} // namespace rdmactor::bench
