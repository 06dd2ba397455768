#include "apps/bench/caf_io_bench.hpp"

#include <cstdio>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/publish.hpp>
#include <caf/send.hpp>
#include <caf/stateful_actor.hpp>

#include "apps/bench/run_channel.hpp"
#include "apps/bench/run_progress.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor::bench::caf_io {

namespace {

using bytes = std::vector<uint8_t>;

caf::behavior server_impl(caf::event_based_actor*, uint64_t max_pull_bytes) {
  auto cache = std::make_shared<bytes>();
  return {
      [](ping_atom, bytes& x) { return std::move(x); },
      [](push_atom, const bytes& x) { return uint64_t{x.size()}; },
      [cache, max_pull_bytes](pull_atom, uint64_t n) -> caf::result<bytes> {
        // The client names the size: cap what we allocate on its claim.
        if (n > max_pull_bytes)
          return make_error(errc::quota_exceeded,
                            "a pull of " + std::to_string(n)
                                + " bytes is over the server's "
                                  "rdmactor.peer-max-claim-bytes="
                                + std::to_string(max_pull_bytes));
        if (cache->size() != n)
          cache->assign(n, sink_flag);
        return *cache;
      },
  };
}

/// The driver's own watchdog message: (watchdog_atom, completed count when
/// it was armed).
using watchdog_atom = caf::atom_constant<caf::atom("watchdog")>;

// Requests carry no CAF timeout (no_caf_timeout, run_channel.hpp): one
// watchdog per `op_timeout` fails the run instead when no answer came in
// that time, and the driver watches the server (a down message fails it
// at once).

struct driver_state {
  caf::actor server;
  run_progress run;
  bytes payload;

  static inline const char* name = "rdmactor.bench.caf_io_driver";
};

using driver_ptr = caf::stateful_actor<driver_state>*;

void fail(driver_ptr self, caf::error err) {
  if (self->state.run.fail(std::move(err)))
    self->quit();
}

void issue(driver_ptr self);

/// One operation completed after `t0`; `halve` for ping-pong.
void on_done(driver_ptr self, run_progress::clock_type::time_point t0,
             bool halve) {
  auto& run = self->state.run;
  if (run.done())
    return;
  auto us = run_progress::micros_since(t0);
  run.complete(halve ? us / 2 : us);
  if (run.finish_if_done()) {
    self->quit();
    return;
  }
  if (run.more_to_issue())
    issue(self);
}

void issue(driver_ptr self) {
  auto& st = self->state;
  st.run.issued();
  auto t0 = run_progress::clock_type::now();
  auto on_error = [self](caf::error& err) { fail(self, std::move(err)); };
  const auto& spec = st.run.spec();
  const bool ping_pong
      = spec.op == bench_op::send && spec.mode == bench_mode::lat;
  if (ping_pong) {
    self->request(st.server, no_caf_timeout, ping_atom::value, st.payload)
        .then([self, t0](bytes&) { on_done(self, t0, true); }, on_error);
  } else if (spec.op == bench_op::read) {
    self->request(st.server, no_caf_timeout, pull_atom::value, spec.size)
        .then([self, t0](bytes&) { on_done(self, t0, false); }, on_error);
  } else {
    self->request(st.server, no_caf_timeout, push_atom::value, st.payload)
        .then([self, t0](uint64_t) { on_done(self, t0, false); }, on_error);
  }
}

caf::behavior driver_impl(driver_ptr self, caf::actor server, run_spec spec,
                          run_channel_ptr chan) {
  auto& st = self->state;
  st.server = std::move(server);
  st.run = run_progress{spec, std::move(chan)};
  if (spec.op == bench_op::raw || is_atomic(spec.op)) {
    fail(self, make_error(errc::invalid_argument,
                          "the caf-io baseline has no raw or atomic "
                          "counterpart; use send, write or read"));
    return {};
  }
  if (spec.op != bench_op::read)
    st.payload.assign(spec.size,
                      spec.mode == bench_mode::lat ? echo_flag : sink_flag);
  self->monitor(st.server);
  self->set_down_handler([self](caf::down_msg& msg) {
    fail(self,
         msg.reason ? msg.reason : make_error(errc::peer_gone, "server gone"));
  });
  st.run.start_clock();
  auto window = spec.mode == bench_mode::lat ? 1u : spec.window;
  for (uint32_t i = 0; i < window && st.run.more_to_issue(); ++i)
    issue(self);
  self->delayed_send(self, spec.op_timeout, watchdog_atom::value,
                     st.run.completed());
  return {
      [self](watchdog_atom, uint64_t completed_then) {
        auto& run = self->state.run;
        if (run.done())
          return;
        if (run.completed() == completed_then) {
          fail(self,
               make_error(errc::request_timeout,
                          "no answer from the server within "
                              + std::to_string(run.spec().op_timeout.count())
                              + " ms (raise --timeout-ms, or check that the "
                                "server is alive)"));
          return;
        }
        self->delayed_send(self, run.spec().op_timeout, watchdog_atom::value,
                           run.completed());
      },
  };
}

/// Body of the forked child; returns its exit status.
int child_main(caf::actor_system_config& cfg, uint64_t max_pull_bytes,
               int port_fd, int control_fd) {
  uint16_t port = 0;
  {
    caf::actor_system sys{cfg};
    auto srv = spawn_server(sys, max_pull_bytes);
    auto published = caf::io::publish(srv, 0, "127.0.0.1");
    if (published)
      port = *published;
    else
      std::fprintf(stderr, "caf-io server: cannot publish: %s\n",
                   sys.render(published.error()).c_str());
    if (!report_port(port_fd, port))
      port = 0;
    // Serve until the parent closes the control pipe (or dies).
    if (port != 0)
      wait_for_parent(control_fd);
    caf::anon_send_exit(srv, caf::exit_reason::user_shutdown);
  }
  return port != 0 ? 0 : 1;
}

} // namespace

void add_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_type<bytes>("std::vector<uint8_t>");
}

caf::actor spawn_server(caf::actor_system& sys, uint64_t max_pull_bytes) {
  return sys.spawn(server_impl, max_pull_bytes);
}

caf::actor spawn_driver(caf::actor_system& sys, caf::actor server,
                        run_spec spec, run_channel_ptr chan) {
  return sys.spawn(driver_impl, std::move(server), spec, std::move(chan));
}

caf::expected<forked_server> fork_server(caf::actor_system_config& cfg,
                                         uint64_t max_pull_bytes) {
  return fork_server_process(
      "caf-io", [&cfg, max_pull_bytes](int port_fd, int control_fd) {
        return child_main(cfg, max_pull_bytes, port_fd, control_fd);
      });
}

} // namespace rdmactor::bench::caf_io
