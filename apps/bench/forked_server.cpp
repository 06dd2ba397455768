#include "apps/bench/forked_server.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdmactor/error.hpp"

namespace rdmactor::bench {

caf::expected<forked_server> fork_server_process(
    const char* what,
    const std::function<int(int port_fd, int control_fd)>& child) {
  int port_pipe[2];
  int control_pipe[2];
  if (::pipe(port_pipe) != 0)
    return make_error(errc::internal_error, "pipe failed");
  if (::pipe(control_pipe) != 0) {
    ::close(port_pipe[0]);
    ::close(port_pipe[1]);
    return make_error(errc::internal_error, "pipe failed");
  }
  std::fflush(stdout);
  std::fflush(stderr);
  auto pid = ::fork();
  if (pid < 0)
    return make_error(errc::internal_error, "fork failed");
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    ::close(port_pipe[0]);
    ::close(control_pipe[1]);
    ::_exit(child(port_pipe[1], control_pipe[0]));
  }
  ::close(port_pipe[1]);
  ::close(control_pipe[0]);
  forked_server srv;
  srv.pid = pid;
  srv.control_fd = control_pipe[1];
  pollfd pfd{port_pipe[0], POLLIN, 0};
  uint16_t port = 0;
  if (::poll(&pfd, 1, 10000) == 1
      && ::read(port_pipe[0], &port, sizeof(port)) == sizeof(port))
    srv.port = port;
  ::close(port_pipe[0]);
  if (srv.port == 0) {
    stop_forked_server(srv);
    return make_error(errc::connect_timeout,
                      std::string{"the "} + what
                          + " server process did not report its port");
  }
  return srv;
}

bool report_port(int port_fd, uint16_t port) {
  bool ok = ::write(port_fd, &port, sizeof(port)) == sizeof(port);
  ::close(port_fd);
  return ok;
}

void wait_for_parent(int control_fd) {
  char c;
  for (;;) {
    auto n = ::read(control_fd, &c, 1);
    if (n == 0 || (n < 0 && errno != EINTR))
      return;
  }
}

void stop_forked_server(forked_server& srv) {
  if (srv.control_fd >= 0) {
    ::close(srv.control_fd);
    srv.control_fd = -1;
  }
  if (srv.pid <= 0)
    return;
  for (int i = 0; i < 100; ++i) {
    if (::waitpid(srv.pid, nullptr, WNOHANG) == srv.pid) {
      srv.pid = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(srv.pid, SIGKILL);
  ::waitpid(srv.pid, nullptr, 0);
  srv.pid = -1;
}

} // namespace rdmactor::bench
