#include <cstdio>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/defaults.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/publish.hpp>

#include "apps/bench/actor_guard.hpp"
#include "apps/bench/caf_io_bench.hpp"
#include "apps/bench/run_sizes.hpp"
#include "apps/bench/runners.hpp"
#include "apps/bench/signal_wait.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/transport/fabric.hpp"

namespace rdmactor::bench {

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "rdmactor-bench (caf-io): %s\n", what.c_str());
  return 1;
}

/// Publishes the server on --listen until SIGINT or SIGTERM.
int serve(caf::actor_system& sys, const bench_plan& plan,
          uint64_t max_pull_bytes) {
  auto addr = transport::parse_address(plan.listen);
  if (!addr)
    return fail(render(addr.error()));
  actor_guard<caf::actor> server{caf_io::spawn_server(sys, max_pull_bytes)};
  auto port
      = caf::io::publish(server.get(), addr->second, addr->first.c_str(), true);
  if (!port)
    return fail("cannot publish on " + plan.listen + ": "
                + sys.render(port.error()));
  std::printf("rdmactor-bench: caf-io server published on port %u; SIGINT "
              "or SIGTERM stops\n",
              *port);
  std::fflush(stdout);
  wait_for_stop_signal();
  return 0;
}

/// Runs every size against the server at host:port.
/// `server_pid`: the forked server's (its CPU time counts), or 0 for a
/// server elsewhere.
int run_against(bench_config& cfg, const bench_plan& plan,
                const std::string& host, uint16_t port, int server_pid) {
  caf::actor_system sys{cfg};
  auto server = sys.middleman().remote_actor(host, port);
  if (!server)
    return fail("cannot reach the caf-io server at " + host + ":"
                + std::to_string(port) + ": " + sys.render(server.error()));
  auto ctx = tcp_baseline_context("caf-io", host, server_pid);
  ctx.poll_attempts
      = caf::get_or(cfg, "work-stealing.aggressive-poll-attempts",
                    caf::defaults::work_stealing::aggressive_poll_attempts);
  report_printer out{plan.json, ctx};
  run_sizes(plan, out, [&](const run_spec& spec, run_channel_ptr chan) {
    // --op=actor is the baseline's own pattern: ping-pong and pushes.
    auto s = spec;
    if (s.op == bench_op::actor)
      s.op = bench_op::send;
    return caf_io::spawn_driver(sys, *server, s, std::move(chan));
  });
  return out.all_ok() ? 0 : 1;
}

} // namespace

int run_caf_io(bench_config& cfg, const bench_plan& plan) {
  cfg.load<caf::io::middleman>();
  if (!plan.listen.empty()) {
    caf::actor_system sys{cfg};
    return serve(sys, plan, cfg.opts.peer_max_claim_bytes);
  }
  if (!plan.connect.empty()) {
    auto addr = transport::parse_address(plan.connect);
    if (!addr)
      return fail(render(addr.error()));
    return run_against(cfg, plan, addr->first, addr->second, 0);
  }
  // The server runs in a child forked before this process has threads:
  // CAF io between two actor systems of one process would talk to itself.
  auto child = caf_io::fork_server(cfg, cfg.opts.peer_max_claim_bytes);
  if (!child)
    return fail(render(child.error()));
  auto rc = run_against(cfg, plan, "127.0.0.1", child->port, child->pid);
  stop_forked_server(*child);
  return rc;
}

} // namespace rdmactor::bench
