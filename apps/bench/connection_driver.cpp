#include "apps/bench/connection_driver.hpp"

#include <chrono>
#include <cstring>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "apps/bench/handler_driver.hpp"
#include "apps/bench/run_channel.hpp"
#include "apps/bench/run_progress.hpp"
#include "protocol/codec.hpp"
#include "rdmactor/error.hpp"
#include "rdmactor/scheduler_job.hpp"

namespace rdmactor::bench {

namespace {

using clock_type = run_progress::clock_type;

struct driver_state {
  connection_actor conn;
  run_progress run;
  local_mr local;
  remote_mr remote;
  /// send lat: chunks the peer echoes per ping.
  uint64_t chunks_per_msg = 1;
  /// send lat: echoed bytes of the current ping.
  uint64_t echo_bytes = 0;
  /// lat: start of the current operation.
  clock_type::time_point t_op;
  /// `run` went to a loop handler (start_in_handler).
  bool handed_off = false;

  static inline const char* name = "rdmactor.bench.driver";
};

using driver_ptr = caf::stateful_actor<driver_state>*;

void fail(driver_ptr self, caf::error err) {
  if (self->state.handed_off)
    return; // the ping handler ends the run (on_detach)
  if (self->state.run.fail(std::move(err)))
    self->quit();
}

/// Returns a handler that fails the run with the error of a request.
auto on_error(driver_ptr self) {
  return [self](caf::error& err) { fail(self, std::move(err)); };
}

void maybe_finish(driver_ptr self) {
  if (self->state.run.finish_if_done())
    self->quit();
}

void issue(driver_ptr self);

/// Completion of one write, read, atomic or (bw) send_data.
void on_done(driver_ptr self, clock_type::time_point t0) {
  auto& run = self->state.run;
  if (run.done())
    return;
  run.complete(run_progress::micros_since(t0));
  if (run.all_completed()) {
    maybe_finish(self);
    return;
  }
  if (run.more_to_issue())
    issue(self);
}

/// Issues one write, read, atomic or (bw) send_data.
void issue(driver_ptr self) {
  auto& st = self->state;
  st.run.issued();
  auto t0 = clock_type::now();
  auto done = [self, t0](uint64_t) { on_done(self, t0); };
  switch (st.run.spec().op) {
    case bench_op::write:
      self->request(st.conn, no_caf_timeout, write_atom::value, st.local,
                    st.remote)
          .then(done, on_error(self));
      break;
    case bench_op::read:
      self->request(st.conn, no_caf_timeout, read_atom::value, st.local,
                    st.remote)
          .then(done, on_error(self));
      break;
    case bench_op::fetch_add:
      self->request(st.conn, no_caf_timeout, fetch_add_atom::value, st.remote,
                    uint64_t{1})
          .then(done, on_error(self));
      break;
    case bench_op::cas:
      // Compares with 0 and swaps in 0: the word stays 0, so every CAS
      // succeeds and does the full work (compare, store, old value).
      self->request(st.conn, no_caf_timeout, compare_swap_atom::value,
                    st.remote, uint64_t{0}, uint64_t{0})
          .then(done, on_error(self));
      break;
    default:
      self->request(st.conn, no_caf_timeout, send_data_atom::value, st.local)
          .then(done, on_error(self));
  }
}

void ping(driver_ptr self);

/// send lat: one echoed chunk arrived.
void on_echo(driver_ptr self, const local_mr& chunk) {
  auto& st = self->state;
  if (st.run.done())
    return;
  st.echo_bytes += chunk.size();
  if (st.echo_bytes < st.run.spec().size)
    return;
  st.run.complete(run_progress::micros_since(st.t_op) / 2);
  if (st.run.all_completed())
    maybe_finish(self);
  else
    ping(self);
}

/// send lat: asks for the echo chunks, then sends one ping.
void ping(driver_ptr self) {
  auto& st = self->state;
  st.echo_bytes = 0;
  st.run.issued();
  ++st.run.acks_pending;
  st.t_op = clock_type::now();
  self->request(st.conn, no_caf_timeout, send_data_atom::value, st.local)
      .then(
          [self](uint64_t) {
            --self->state.run.acks_pending;
            maybe_finish(self);
          },
          on_error(self));
}

/// send, write and read (unless `--actor-driver`): hands the run to a loop
/// handler on the connection (handler_driver.hpp); send lat sends the first
/// ping, which the handler cannot (it sends only when called).
void start_in_handler(driver_ptr self) {
  auto& st = self->state;
  bool send = st.run.spec().op == bench_op::send
              && st.run.spec().mode == bench_mode::lat;
  auto h = make_loop_handler(std::move(st.run), st.local, st.remote,
                             caf::actor_cast<caf::actor_addr>(self));
  st.handed_off = true;
  // The subscription reaches the agent before the ping (same sender, same
  // receiver): the echo finds the handler.
  self->request(st.conn, no_caf_timeout, subscribe_data_atom::value, h)
      .then([](uint64_t) {}, [](caf::error&) {});
  if (send)
    self->request(st.conn, no_caf_timeout, send_data_atom::value, st.local)
        .then([](uint64_t) {}, [](caf::error&) {});
}

void start(driver_ptr self) {
  auto& run = self->state.run;
  run.start_clock();
  const auto& spec = run.spec();
  if (runs_in_handler(spec)) {
    start_in_handler(self);
    return;
  }
  if (spec.op == bench_op::send && spec.mode == bench_mode::lat) {
    // The echoes are pushed to this driver (subscribe_data), as CAF io
    // pushes the echo to its caller.
    self->request(self->state.conn, no_caf_timeout, subscribe_data_atom::value,
                  caf::actor_cast<data_subscriber>(self))
        .then([self](uint64_t) { ping(self); }, on_error(self));
    return;
  }
  auto window = spec.mode == bench_mode::lat ? 1u : spec.window;
  for (uint32_t i = 0; i < window && run.more_to_issue(); ++i)
    issue(self);
}

/// Allocates the memory of the run, then starts it.
void setup(driver_ptr self) {
  auto& st = self->state;
  self->request(st.conn, no_caf_timeout, peer_atom::value)
      .then(
          [self](transport::link_params& link) {
            auto& st = self->state;
            auto chunk_max = uint64_t{link.max_message_len_bytes}
                             - protocol::max_frame_overhead;
            st.chunks_per_msg
                = (st.run.spec().size + chunk_max - 1) / chunk_max;
            self->request(st.conn, no_caf_timeout, alloc_local_mr_atom::value,
                          st.run.spec().size, uint64_t{64})
                .then(
                    [self](local_mr& mr) {
                      auto& st = self->state;
                      const auto& spec = st.run.spec();
                      auto flag = spec.mode == bench_mode::lat ? echo_flag
                                                               : sink_flag;
                      if (mr.size() > 0)
                        std::memset(mr.data(), flag, mr.size());
                      st.local = std::move(mr);
                      if (spec.op == bench_op::send) {
                        start(self);
                        return;
                      }
                      self->request(st.conn, no_caf_timeout,
                                    request_remote_mr_atom::value, spec.size,
                                    uint64_t{64})
                          .then(
                              [self](remote_mr& rmr) {
                                self->state.remote = std::move(rmr);
                                start(self);
                              },
                              on_error(self));
                    },
                    on_error(self));
          },
          on_error(self));
}

caf::behavior driver_impl(driver_ptr self, connection_actor conn, run_spec spec,
                          run_channel_ptr chan) {
  auto& st = self->state;
  st.conn = std::move(conn);
  st.run = run_progress{spec, std::move(chan)};
  self->monitor(st.conn);
  self->set_down_handler([self](caf::down_msg& msg) {
    fail(self, msg.reason ? msg.reason
                          : make_error(errc::peer_gone, "connection closed"));
  });
  if (spec.op == bench_op::send && spec.mode == bench_mode::lat
      && spec.size == 0) {
    fail(self, make_error(errc::invalid_argument,
                          "send ping-pong needs a size of at least 1 byte"));
    return {};
  }
  setup(self);
  return {
      [self](data_atom, local_mr& chunk) { on_echo(self, chunk); },
  };
}

} // namespace

caf::actor spawn_connection_driver(caf::actor_system& sys,
                                   connection_actor conn, run_spec spec,
                                   run_channel_ptr chan, bool plain) {
  if (plain)
    return sys.spawn(driver_impl, std::move(conn), spec, std::move(chan));
  return spawn_with_scheduler_job(sys, driver_impl, std::move(conn), spec,
                                  std::move(chan));
}

} // namespace rdmactor::bench
