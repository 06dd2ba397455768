#include "apps/bench/connection_driver.hpp"

#include <chrono>
#include <cstring>
#include <vector>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "common/error.hpp"
#include "protocol/codec.hpp"

namespace rdmactor::bench {

namespace {

using clock_type = std::chrono::steady_clock;

struct driver_state {
  connection_actor conn;
  run_spec spec;
  run_channel_ptr chan;
  local_mr local;
  remote_mr remote;
  /// send lat: chunks the peer echoes per ping.
  uint64_t chunks_per_msg = 1;
  /// Warmup plus measured operations.
  uint64_t total = 0;
  uint64_t issued = 0;
  uint64_t completed = 0;
  /// send lat: echoed bytes of the current ping and open send_data acks.
  uint64_t echo_bytes = 0;
  uint64_t acks_pending = 0;
  /// lat: start of the current operation.
  clock_type::time_point t_op;
  /// Start of the measured part.
  clock_type::time_point t_start;
  std::vector<double> samples;
  bool done = false;

  static inline const char* name = "rdmactor.bench.driver";
};

using driver_ptr = caf::stateful_actor<driver_state>*;

double micros(clock_type::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

void fail(driver_ptr self, caf::error err) {
  auto& st = self->state;
  if (st.done)
    return;
  st.done = true;
  st.chan->fail(std::move(err));
  self->quit();
}

/// Returns a handler that fails the run with the error of a request.
auto on_error(driver_ptr self) {
  return [self](caf::error& err) { fail(self, std::move(err)); };
}

void maybe_finish(driver_ptr self) {
  auto& st = self->state;
  if (st.done || st.completed < st.total || st.acks_pending > 0)
    return;
  st.done = true;
  run_outcome x;
  x.ops = st.spec.iters;
  x.bytes = st.spec.iters * st.spec.size;
  x.elapsed_s
      = std::chrono::duration<double>(clock_type::now() - st.t_start).count();
  x.lat_us = std::move(st.samples);
  st.chan->finish(std::move(x));
  self->quit();
}

/// Counts one completed operation; `sample` is its latency in us.
void complete(driver_ptr self, double sample) {
  auto& st = self->state;
  ++st.completed;
  st.chan->tick();
  if (st.completed > st.spec.warmup) {
    if (st.spec.mode == bench_mode::lat)
      st.samples.push_back(sample);
  } else if (st.completed == st.spec.warmup) {
    st.t_start = clock_type::now();
  }
}

void issue(driver_ptr self);

/// Completion of one write, read or (bw) send_data.
void on_done(driver_ptr self, clock_type::time_point t0) {
  auto& st = self->state;
  if (st.done)
    return;
  complete(self, micros(clock_type::now() - t0));
  if (st.completed == st.total) {
    maybe_finish(self);
    return;
  }
  if (st.issued < st.total)
    issue(self);
}

/// Issues one write, read or (bw) send_data.
void issue(driver_ptr self) {
  auto& st = self->state;
  ++st.issued;
  auto t0 = clock_type::now();
  auto done = [self, t0](uint64_t) { on_done(self, t0); };
  switch (st.spec.op) {
    case bench_op::write:
      self->request(st.conn, st.spec.op_timeout, write_atom::value, st.local,
                    st.remote)
          .then(done, on_error(self));
      break;
    case bench_op::read:
      self->request(st.conn, st.spec.op_timeout, read_atom::value, st.local,
                    st.remote)
          .then(done, on_error(self));
      break;
    default:
      self->request(st.conn, st.spec.op_timeout, send_data_atom::value,
                    st.local)
          .then(done, on_error(self));
  }
}

void ping(driver_ptr self);

/// send lat: one echoed chunk arrived.
void on_echo(driver_ptr self, const local_mr& chunk) {
  auto& st = self->state;
  if (st.done)
    return;
  st.echo_bytes += chunk.size();
  if (st.echo_bytes < st.spec.size)
    return;
  complete(self, micros(clock_type::now() - st.t_op) / 2);
  if (st.completed == st.total)
    maybe_finish(self);
  else
    ping(self);
}

/// send lat: asks for the echo chunks, then sends one ping.
void ping(driver_ptr self) {
  auto& st = self->state;
  st.echo_bytes = 0;
  ++st.issued;
  for (uint64_t i = 0; i < st.chunks_per_msg; ++i)
    self->request(st.conn, st.spec.op_timeout, receive_data_atom::value)
        .then([self](local_mr& chunk) { on_echo(self, chunk); },
              on_error(self));
  ++st.acks_pending;
  st.t_op = clock_type::now();
  self->request(st.conn, st.spec.op_timeout, send_data_atom::value, st.local)
      .then(
          [self](uint64_t) {
            --self->state.acks_pending;
            maybe_finish(self);
          },
          on_error(self));
}

void start(driver_ptr self) {
  auto& st = self->state;
  st.t_start = clock_type::now();
  if (st.spec.op == bench_op::send && st.spec.mode == bench_mode::lat) {
    ping(self);
    return;
  }
  auto window = st.spec.mode == bench_mode::lat ? 1u : st.spec.window;
  for (uint32_t i = 0; i < window && st.issued < st.total; ++i)
    issue(self);
}

/// Allocates the memory of the run, then starts it.
void setup(driver_ptr self) {
  auto& st = self->state;
  self->request(st.conn, st.spec.op_timeout, peer_atom::value)
      .then(
          [self](transport::link_params& link) {
            auto& st = self->state;
            auto chunk_max = uint64_t{link.max_message_len_bytes}
                             - protocol::max_frame_overhead;
            st.chunks_per_msg = (st.spec.size + chunk_max - 1) / chunk_max;
            self->request(st.conn, st.spec.op_timeout,
                          alloc_local_mr_atom::value, st.spec.size,
                          uint64_t{64})
                .then(
                    [self](local_mr& mr) {
                      auto& st = self->state;
                      auto flag = st.spec.mode == bench_mode::lat ? echo_flag
                                                                  : sink_flag;
                      if (mr.size() > 0)
                        std::memset(mr.data(), flag, mr.size());
                      st.local = std::move(mr);
                      if (st.spec.op == bench_op::send) {
                        start(self);
                        return;
                      }
                      self->request(st.conn, st.spec.op_timeout,
                                    request_remote_mr_atom::value, st.spec.size,
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
  st.spec = spec;
  st.chan = std::move(chan);
  st.total = spec.warmup + spec.iters;
  if (spec.mode == bench_mode::lat)
    st.samples.reserve(spec.iters);
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
  return {[](caf::unit_t) {}};
}

} // namespace

caf::actor spawn_connection_driver(caf::actor_system& sys,
                                   connection_actor conn, run_spec spec,
                                   run_channel_ptr chan) {
  return sys.spawn(driver_impl, std::move(conn), spec, std::move(chan));
}

} // namespace rdmactor::bench
