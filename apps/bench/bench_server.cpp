#include "apps/bench/bench_server.hpp"

#include <atomic>
#include <chrono>
#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "apps/bench/run_channel.hpp"
#include "apps/bench/run_spec.hpp"
#include "common/logging.hpp"
#include "rdmactor/data_handler.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/scheduler_job.hpp"

namespace rdmactor::bench {

namespace {

std::atomic<uint64_t> live_servers{0};

struct server_state {
  connection_actor conn;
  /// CAF timeout of the subscription request (`--timeout-ms`).
  std::chrono::milliseconds timeout{30000};

  server_state() {
    ++live_servers;
  }

  ~server_state() {
    --live_servers;
  }

  server_state(const server_state&) = delete;
  server_state& operator=(const server_state&) = delete;

  static inline const char* name = "rdmactor.bench.server";
};

using server_ptr = caf::stateful_actor<server_state>*;

/// Quits on errors other than a receive timeout; returns true then.
bool fatal(server_ptr self, const caf::error& err) {
  if (code_of(err) == errc::request_timeout)
    return false;
  if (code_of(err) != errc::peer_gone && code_of(err) != errc::closed)
    log().warn("bench server: {}", render(err));
  self->quit();
  return true;
}

/// The echo of `--actor-echo=false` (the default): inside the agent's
/// activation that read the ping, so the echo carries its acknowledgement
/// and no user actor runs per message.  Errors of an echo come from the
/// connection's end, which the server actor sees by its monitor.
data_handler_ptr echo_handler() {
  return make_data_handler([](data_context& ctx, local_mr chunk) {
    if (chunk.size() > 0 && chunk.data()[0] == echo_flag)
      ctx.send_data(std::move(chunk));
  });
}

caf::behavior server_impl(server_ptr self, connection_actor conn,
                          server_options how) {
  self->state.conn = std::move(conn);
  self->state.timeout = how.timeout;
  auto server_timeout = how.timeout;
  auto actor_echo = how.actor_echo;
  self->monitor(self->state.conn);
  self->set_down_handler([self](caf::down_msg&) { self->quit(); });
  if (!actor_echo) {
    self->request(self->state.conn, server_timeout, subscribe_data_atom::value,
                  echo_handler())
        .then([](uint64_t) {}, [self](caf::error& err) { fatal(self, err); });
    return {[](data_atom, local_mr&) {}};
  }
  // Every chunk is pushed here (no receive_data request per chunk).
  self->request(self->state.conn, server_timeout, subscribe_data_atom::value,
                caf::actor_cast<data_subscriber>(self))
      .then([](uint64_t) {}, [self](caf::error& err) { fatal(self, err); });
  return {
      [self](data_atom, local_mr& chunk) {
        if (chunk.size() > 0 && chunk.data()[0] == echo_flag)
          // rdmactor answers within request-timeout-ms (no_caf_timeout).
          self->request(self->state.conn, no_caf_timeout, send_data_atom::value,
                        std::move(chunk))
              .then([](uint64_t) {},
                    [self](caf::error& err) { fatal(self, err); });
      },
  };
}

struct acceptor_state {
  /// The servers of the connections being served.  Nothing else may hold
  /// one: the connection holds its data handler, not the actor, and CAF
  /// destroys an actor that nobody refers to (here: once the CAF timeout
  /// of its subscription request, the last reference, fired).
  std::unordered_map<caf::actor_addr, caf::actor> servers;

  static inline const char* name = "rdmactor.bench.acceptor";
};

caf::behavior acceptor_impl(caf::stateful_actor<acceptor_state>* self,
                            server_options how) {
  self->set_down_handler(
      [self](caf::down_msg& dm) { self->state.servers.erase(dm.source); });
  return {
      [self, how](accepted_atom, connection_actor& conn) {
        auto srv = spawn_bench_server(self->system(), std::move(conn), how);
        self->monitor(srv);
        auto addr = srv.address();
        self->state.servers.emplace(std::move(addr), std::move(srv));
      },
  };
}

} // namespace

caf::actor spawn_bench_server(caf::actor_system& sys, connection_actor conn,
                              server_options how) {
  if (how.plain)
    return sys.spawn(server_impl, std::move(conn), how);
  return spawn_with_scheduler_job(sys, server_impl, std::move(conn), how);
}

caf::actor spawn_bench_acceptor(caf::actor_system& sys, server_options how) {
  return sys.spawn(acceptor_impl, how);
}

uint64_t live_bench_servers() noexcept {
  return live_servers.load();
}

} // namespace rdmactor::bench
