#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/defaults.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include "apps/bench/actor_guard.hpp"
#include "apps/bench/bench_server.hpp"
#include "apps/bench/caf_io_bench.hpp"
#include "apps/bench/connection_driver.hpp"
#include "apps/bench/forked_server.hpp"
#include "apps/bench/process_stats.hpp"
#include "apps/bench/raw_driver.hpp"
#include "apps/bench/raw_link.hpp"
#include "apps/bench/report.hpp"
#include "apps/bench/run_sizes.hpp"
#include "apps/bench/runners.hpp"
#include "apps/bench/scale_runner.hpp"
#include "apps/bench/signal_wait.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/node.hpp"

namespace rdmactor::bench {

namespace {

/// The name the bench server publishes the caf-io baseline's server actor
/// under (--op=actor).
constexpr const char* bench_actor_name = "rdmactor-bench";

int fail(const caf::error& err) {
  std::fprintf(stderr, "rdmactor-bench: %s\n", render(err).c_str());
  return 1;
}

uint64_t poll_attempts(const caf::actor_system_config& cfg) {
  return caf::get_or(cfg, "work-stealing.aggressive-poll-attempts",
                     caf::defaults::work_stealing::aggressive_poll_attempts);
}

/// The polling of raw transports: what connections of `plan` would use.
transport::polling polling_for(const transport::device& dev,
                               const bench_plan& plan) {
  return transport::effective_polling(dev, transport::polling_of(plan.opts));
}

/// "HOST:PORT", HOST bracketed when it is an IPv6 address.
std::string address(const std::string& host, uint32_t port) {
  auto h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return h + ":" + std::to_string(port);
}

/// Returns HOST:PORT+1, where a bench server accepts raw endpoints.
caf::expected<std::string> raw_address_of(const std::string& host_port) {
  auto addr = transport::parse_address(host_port);
  if (!addr)
    return std::move(addr.error());
  if (addr->second == 65535)
    return make_error(errc::invalid_address,
                      "the server port must leave room for PORT+1");
  return address(addr->first, addr->second + 1u);
}

/// How this run's bench servers run.
server_options server_options_of(const bench_plan& plan) {
  server_options how;
  how.plain = plan.plain_actors;
  how.actor_echo = plan.actor_echo;
  how.timeout = plan.op_timeout;
  return how;
}

/// The server side of the bench in this process: a node whose accepted
/// connections each get a bench server, with the caf-io baseline's server
/// actor published on it (--op=actor) and, when asked, raw endpoints.
class bench_serving {
public:
  bench_serving(caf::actor_system& sys, const bench_plan& plan)
      : sys_(sys), plan_(plan),
        acceptor_(spawn_bench_acceptor(sys, server_options_of(plan))),
        actor_server_(
            caf_io::spawn_server(sys, plan.opts.peer_max_claim_bytes)) {}

  bench_serving(const bench_serving&) = delete;
  bench_serving& operator=(const bench_serving&) = delete;

  ~bench_serving() {
    close();
  }

  /// Opens the node and serves connections on `host_port` (port 0: any);
  /// returns the bound port.
  caf::expected<uint16_t> start(const std::string& host_port) {
    auto nd = node::open(sys_, plan_.opts);
    if (!nd)
      return std::move(nd.error());
    node_ = std::move(*nd);
    node_->publish(bench_actor_name, actor_server_.get());
    return node_->listen(host_port, acceptor_.get());
  }

  /// Serves raw endpoints on `host_port` (port 0: any); returns the bound
  /// port.  After `start` succeeded.
  caf::expected<uint16_t> start_raw(const std::string& host_port) {
    return raw_.start(sys_, node_->device(), host_port,
                      transport::conn_params{raw_listen_max_message_bytes,
                                             plan_.opts.recv_depth},
                      polling_for(*node_->device(), plan_));
  }

  /// Serves raw endpoints where clients look for them: PORT+1 of the
  /// connections' `host_port` (`raw_address_of`).  After `start`.
  caf::expected<uint16_t> start_raw_beside(const std::string& host_port) {
    auto raw = raw_address_of(host_port);
    if (!raw)
      return std::move(raw.error());
    return start_raw(*raw);
  }

  /// The node.  After `start` succeeded.
  node& get() noexcept {
    return *node_;
  }

  /// Stops the raw endpoints and closes the node.  Idempotent.
  void close() {
    raw_.stop();
    if (node_)
      node_->close();
  }

private:
  caf::actor_system& sys_;
  const bench_plan& plan_;
  // Destroyed in reverse: raw endpoints, the actors, then the node.
  std::unique_ptr<node> node_;
  actor_guard<caf::actor> acceptor_;
  actor_guard<caf::actor> actor_server_;
  raw_listener raw_;
};

/// Serves connections (agent) on --listen and raw endpoints on PORT+1
/// until SIGINT or SIGTERM.
int serve(caf::actor_system& sys, const bench_plan& plan) {
  bench_serving srv{sys, plan};
  auto port = srv.start(plan.listen);
  if (!port)
    return fail(port.error());
  auto* nd = &srv.get();
  auto raw_port = srv.start_raw_beside(
      address(transport::parse_address(plan.listen)->first, *port));
  std::string raw_note;
  if (raw_port)
    raw_note = " and " + std::to_string(*raw_port) + " (raw)";
  else
    std::fprintf(stderr, "rdmactor-bench: serving without raw endpoints: %s\n",
                 render(raw_port.error()).c_str());
  std::printf("rdmactor-bench: fabric %s (%s); serving on port %u "
              "(connections)%s; SIGINT or SIGTERM stops\n",
              nd->device()->kind(), nd->device()->name().c_str(), *port,
              raw_note.c_str());
  std::fflush(stdout);
  // A line whenever what this process costs changed (checked every 500
  // ms), so that a client's --op=connect --hold-ms can read the server's
  // side too.
  // And, while the number of connections stays the same, the CPU time of
  // this process since it last changed (at 1 s, then every 5 s): what N
  // idle connections cost, while a client holds them.  This loop's own
  // time is left out: its reads of /proc/self cost more than thousands of
  // idle connections.
  auto node_cpu = [] { return cpu_seconds() - thread_cpu_seconds(); };
  std::string last;
  uint64_t stable_count = live_bench_servers();
  auto stable_since = std::chrono::steady_clock::now();
  auto stable_cpu = node_cpu();
  double reported_s = 0;
  while (!wait_for_stop_signal(std::chrono::milliseconds{500})) {
    auto now = std::chrono::steady_clock::now();
    auto count = live_bench_servers();
    if (count != stable_count) {
      stable_count = count;
      stable_since = now;
      stable_cpu = node_cpu();
      reported_s = 0;
    } else {
      auto stable_s = std::chrono::duration<double>(now - stable_since).count();
      if (stable_s >= 1.0
          && (reported_s == 0 || stable_s >= reported_s + 5.0)) {
        std::printf("rdmactor-bench: %llu connections unchanged for %.1f s: "
                    "cpu %.2f %% of a core\n",
                    static_cast<unsigned long long>(count), stable_s,
                    (node_cpu() - stable_cpu) * 100.0 / stable_s);
        std::fflush(stdout);
        reported_s = stable_s;
      }
    }
    auto ps = read_process_stats();
    char line[256];
    std::snprintf(
        line, sizeof(line),
        "rdmactor-bench: serving %llu connections: threads %llu, "
        "rss_kb %llu, registered_bytes %llu, fds %llu\n",
        static_cast<unsigned long long>(live_bench_servers()),
        static_cast<unsigned long long>(ps.threads),
        static_cast<unsigned long long>(ps.rss_kb),
        static_cast<unsigned long long>(nd->device()->registered_bytes()),
        static_cast<unsigned long long>(ps.fds));
    if (line != last) {
      std::fputs(line, stdout);
      std::fflush(stdout);
      last = line;
    }
  }
  return 0;
}

/// Runs the raw plan: two transport actors, no agent.
int run_raw(caf::actor_system& sys, const bench_plan& plan, node& client,
            const std::string& raw_addr, report_printer& out) {
  auto max_size = *std::max_element(plan.sizes.begin(), plan.sizes.end());
  auto need = max_size + raw_header_bytes;
  need = (need + 4095) / 4096 * 4096;
  if (need > raw_listen_max_message_bytes)
    return fail(make_error(
        errc::invalid_argument,
        "raw sizes stop at "
            + std::to_string(raw_listen_max_message_bytes - raw_header_bytes)
            + " bytes"));
  transport::conn_params offer{
      std::max<uint32_t>(plan.opts.max_message_len_bytes,
                         static_cast<uint32_t>(need)),
      plan.opts.recv_depth};
  auto transport
      = raw_connect(sys, client.device(), raw_addr, offer,
                    std::chrono::milliseconds{plan.opts.connect_timeout_ms},
                    polling_for(*client.device(), plan));
  if (!transport)
    return fail(transport.error());
  actor_guard<transport::transport_actor> transport_guard{*transport};
  auto payload = client.pool()->allocate(std::max<uint64_t>(max_size, 1), 64,
                                         transport::access::all);
  if (!payload)
    return fail(payload.error());
  run_sizes(plan, out, [&](const run_spec& spec, run_channel_ptr chan) {
    local_mr slice;
    if (spec.size > 0)
      slice = *payload->slice(0, spec.size);
    return spawn_raw_driver(sys, *transport, std::move(slice), spec,
                            std::move(chan));
  });
  return 0;
}

/// Prints the counters of `conn` that tell how small messages were
/// batched (--stats), on stderr.
void print_batching_stats(caf::actor_system& sys,
                          const connection_actor& conn) {
  caf::scoped_actor self{sys};
  self->request(conn, std::chrono::seconds(10), stats_atom::value)
      .receive(
          [&](const agent_stats& s) {
            auto u
                = [](uint64_t x) { return static_cast<unsigned long long>(x); };
            std::fprintf(stderr,
                         "rdmactor-bench: client connection: packed messages "
                         "sent %llu carrying %llu frames; acknowledgements "
                         "received merged %llu, piggybacked %llu; actor acks "
                         "received %llu, sent %llu\n",
                         u(s.packed_messages_sent), u(s.packed_frames_sent),
                         u(s.merged_acks_received),
                         u(s.piggybacked_acks_received),
                         u(s.actor_acks_received), u(s.actor_acks_sent));
          },
          [&](const caf::error& err) {
            std::fprintf(stderr, "rdmactor-bench: no connection counters: %s\n",
                         render(err).c_str());
          });
}

/// Runs the plan against the server at `addr` (raw endpoints at
/// `raw_addr`) from the node `client`.
int run_client(caf::actor_system& sys, const bench_plan& plan, node& client,
               const std::string& addr, const std::string& raw_addr,
               const run_context& ctx) {
  if (plan.op == bench_op::connect)
    return run_connect(sys, plan, client, addr, ctx);
  report_printer out{plan.json, ctx};
  if (plan.op == bench_op::raw) {
    if (auto rc = run_raw(sys, plan, client, raw_addr, out); rc != 0)
      return rc;
    return out.all_ok() ? 0 : 1;
  }
  std::vector<connection_actor> idle;
  if (plan.idle_peers > 0) {
    auto conns = open_idle_peers(client, addr, plan.idle_peers);
    if (!conns)
      return fail(conns.error());
    idle = std::move(*conns);
  }
  auto conn = client.connect(addr);
  if (!conn)
    return fail(conn.error());
  if (plan.op == bench_op::actor) {
    // The caf-io baseline's server and driver, over an rdmactor proxy.
    caf::scoped_actor self{sys};
    caf::actor proxy;
    caf::error err;
    self->request(*conn, std::chrono::seconds(30), lookup_atom::value,
                  std::string{bench_actor_name})
        .receive([&](caf::actor& x) { proxy = std::move(x); },
                 [&](caf::error& e) { err = std::move(e); });
    if (!proxy)
      return fail(err);
    run_sizes(plan, out, [&](const run_spec& spec, run_channel_ptr chan) {
      auto s = spec;
      s.op = bench_op::send;
      return caf_io::spawn_driver(sys, proxy, s, std::move(chan));
    });
    if (plan.stats)
      print_batching_stats(sys, *conn);
    return out.all_ok() ? 0 : 1;
  }
  // One busy connection, or --connections of them: a driver each, one row.
  std::vector<connection_actor> busy{*conn};
  while (busy.size() < plan.connections) {
    auto more = client.connect(addr);
    if (!more)
      return fail(more.error());
    busy.push_back(std::move(*more));
  }
  run_lanes(plan, busy.size(), out,
            [&](const run_spec& spec, run_channel_ptr chan, size_t lane) {
              return spawn_connection_driver(
                  sys, busy[lane], spec, std::move(chan), plan.plain_actors);
            });
  for (size_t i = 1; i < busy.size(); ++i)
    caf::anon_send_exit(busy[i], caf::exit_reason::user_shutdown);
  if (plan.stats)
    print_batching_stats(sys, *conn);
  for (auto& x : idle)
    caf::anon_send_exit(x, caf::exit_reason::user_shutdown);
  return out.all_ok() ? 0 : 1;
}

/// The context of runs from `client`: what the table and JSON say of them.
run_context client_context(const bench_config& cfg, const bench_plan& plan,
                           node& client) {
  run_context ctx;
  ctx.impl = "rdmactor";
  ctx.fabric = client.device()->kind();
  ctx.device = client.device()->name();
  ctx.poll_attempts = poll_attempts(cfg);
  if (!plan.connect.empty())
    ctx.topology = "two processes";
  else if (plan.fork_server)
    ctx.topology = "two processes (forked server)";
  else
    ctx.topology = "one process, two nodes";
  if (plan.idle_peers > 0)
    ctx.topology += ", " + std::to_string(plan.idle_peers) + " idle peers";
  if (plan.connections > 1)
    ctx.topology
        += ", " + std::to_string(plan.connections) + " busy connections";
  if (plan.plain_actors)
    ctx.topology += ", plain actors";
  if (plan.actor_echo)
    ctx.topology += ", actor echo";
  if (plan.actor_driver)
    ctx.topology += ", actor driver";
  return ctx;
}

/// The forked server process (--fork-server): serves connections on
/// --host port 0 (raw endpoints on PORT+1 for --op=raw), writes the port
/// to `port_fd` and serves until `control_fd` reads end of file.  Prints
/// nothing on stdout (the parent's JSON lines go there).
int serve_forked(bench_config& cfg, const bench_plan& plan, int port_fd,
                 int control_fd) {
  uint16_t port = 0;
  {
    caf::actor_system sys{cfg};
    bench_serving srv{sys, plan};
    caf::error err;
    auto listening = srv.start(address(plan.host, 0));
    if (!listening)
      err = std::move(listening.error());
    else if (plan.op == bench_op::raw) {
      auto raw = srv.start_raw_beside(address(plan.host, *listening));
      if (!raw)
        err = std::move(raw.error());
    }
    if (err)
      std::fprintf(stderr, "rdmactor-bench (forked server): %s\n",
                   render(err).c_str());
    else
      port = *listening;
    if (!report_port(port_fd, port))
      port = 0;
    if (port != 0)
      wait_for_parent(control_fd);
  }
  return port != 0 ? 0 : 1;
}

/// Runs the plan from this process against a server node in a child
/// forked first (--fork-server); both processes' CPU time counts.
int run_with_forked_server(bench_config& cfg, const bench_plan& plan) {
  auto child = fork_server_process(
      "rdmactor", [&cfg, &plan](int port_fd, int control_fd) {
        return serve_forked(cfg, plan, port_fd, control_fd);
      });
  if (!child)
    return fail(child.error());
  int rc = 1;
  {
    caf::actor_system sys{cfg};
    if (auto client = node::open(sys, plan.opts); !client) {
      rc = fail(client.error());
    } else {
      auto ctx = client_context(cfg, plan, **client);
      ctx.cpu_pids = {0, child->pid};
      auto addr = address(plan.host, child->port);
      auto raw_addr = raw_address_of(addr);
      rc = raw_addr ? run_client(sys, plan, **client, addr, *raw_addr, ctx)
                    : fail(raw_addr.error());
      (*client)->close();
    }
  }
  stop_forked_server(*child);
  return rc;
}

} // namespace

int run_rdmactor(bench_config& cfg, const bench_plan& plan) {
  if (plan.fork_server)
    return run_with_forked_server(cfg, plan);
  caf::actor_system sys{cfg};
  if (!plan.listen.empty())
    return serve(sys, plan);
  auto client = node::open(sys, plan.opts);
  if (!client)
    return fail(client.error());
  auto ctx = client_context(cfg, plan, **client);
  if (!plan.connect.empty()) {
    ctx.cpu_scope = "client";
    auto raw_addr = raw_address_of(plan.connect);
    if (!raw_addr)
      return fail(raw_addr.error());
    auto rc = run_client(sys, plan, **client, plan.connect, *raw_addr, ctx);
    (*client)->close();
    return rc;
  }
  // Both sides in this process: a second node serves.
  bench_serving srv{sys, plan};
  auto port = srv.start(address(plan.host, 0));
  if (!port)
    return fail(port.error());
  // Raw endpoints only when the plan needs them.
  std::string raw_addr;
  if (plan.op == bench_op::raw) {
    auto raw_port = srv.start_raw(address(plan.host, 0));
    if (!raw_port)
      return fail(raw_port.error());
    raw_addr = address(plan.host, *raw_port);
  }
  auto rc = run_client(sys, plan, **client, address(plan.host, *port), raw_addr,
                       ctx);
  (*client)->close();
  srv.close();
  return rc;
}

} // namespace rdmactor::bench
