#include <cstdio>
#include <string>

#include <unistd.h>

#include <caf/actor_system.hpp>

#include "apps/bench/run_sizes.hpp"
#include "apps/bench/runners.hpp"
#include "apps/bench/tcp_baseline.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor::bench {

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "rdmactor-bench (tcp): %s\n", what.c_str());
  return 1;
}

/// Serves on --listen until the process is stopped (SIGINT or SIGTERM end
/// it: the server holds nothing that needs a clean shutdown).
int serve_listen(const bench_plan& plan) {
  auto addr = transport::parse_address(plan.listen);
  if (!addr)
    return fail(render(addr.error()));
  uint16_t port = 0;
  auto fd = tcp::listen_on(addr->first, addr->second, port);
  if (!fd)
    return fail(render(fd.error()));
  std::printf("rdmactor-bench: tcp baseline server on port %u; SIGINT or "
              "SIGTERM stops\n",
              port);
  std::fflush(stdout);
  auto rc = tcp::serve(*fd, -1);
  ::close(*fd);
  return rc;
}

/// Runs every size against the server at host:port.  `server_pid`: the
/// forked server's (its CPU time counts), or 0 for a server elsewhere.
int run_against(bench_config& cfg, const bench_plan& plan,
                const std::string& host, uint16_t port, int server_pid) {
  caf::actor_system sys{cfg};
  auto ctx = tcp_baseline_context("tcp", host, server_pid);
  report_printer out{plan.json, ctx};
  run_sizes(plan, out, [&](const run_spec& spec, run_channel_ptr chan) {
    // --op=actor compares with the same pattern: ping-pong and pushes.
    auto s = spec;
    if (s.op == bench_op::actor)
      s.op = bench_op::send;
    return tcp::spawn_driver(sys, host, port, s, std::move(chan));
  });
  return out.all_ok() ? 0 : 1;
}

} // namespace

int run_tcp(bench_config& cfg, const bench_plan& plan) {
  if (!plan.listen.empty())
    return serve_listen(plan);
  if (!plan.connect.empty()) {
    auto addr = transport::parse_address(plan.connect);
    if (!addr)
      return fail(render(addr.error()));
    return run_against(cfg, plan, addr->first, addr->second, 0);
  }
  // The server runs in a child forked before this process has threads.
  auto child = tcp::fork_server();
  if (!child)
    return fail(render(child.error()));
  auto rc = run_against(cfg, plan, "127.0.0.1", child->port, child->pid);
  stop_forked_server(*child);
  return rc;
}

} // namespace rdmactor::bench
