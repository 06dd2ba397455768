#include "apps/bench/raw_driver.hpp"

#include <chrono>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "common/error.hpp"

namespace rdmactor::bench {

namespace {

using clock_type = std::chrono::steady_clock;

struct raw_state {
  transport::transport_actor transport;
  run_spec spec;
  run_channel_ptr chan;
  local_mr payload;
  std::vector<uint8_t> header;
  uint64_t total = 0;
  uint64_t issued = 0;
  uint64_t completed = 0;
  uint64_t acks_pending = 0;
  clock_type::time_point t_op;
  clock_type::time_point t_start;
  std::vector<double> samples;
  bool done = false;

  static inline const char* name = "rdmactor.bench.raw_driver";
};

using raw_ptr = caf::stateful_actor<raw_state>*;

double micros(clock_type::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

void fail(raw_ptr self, caf::error err) {
  auto& st = self->state;
  if (st.done)
    return;
  st.done = true;
  st.chan->fail(std::move(err));
  self->quit();
}

void maybe_finish(raw_ptr self) {
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

void complete(raw_ptr self, double sample) {
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

/// Sends one message; in bw mode its completion completes an operation.
void send_one(raw_ptr self) {
  auto& st = self->state;
  ++st.issued;
  ++st.acks_pending;
  st.t_op = clock_type::now();
  auto t0 = st.t_op;
  self->request(st.transport, st.spec.op_timeout, transport::send_atom::value,
                st.header, st.payload)
      .then(
          [self, t0](uint64_t) {
            auto& st = self->state;
            --st.acks_pending;
            if (st.done)
              return;
            if (st.spec.mode == bench_mode::bw) {
              complete(self, micros(clock_type::now() - t0));
              if (st.issued < st.total)
                send_one(self);
            }
            maybe_finish(self);
          },
          [self](caf::error& err) { fail(self, std::move(err)); });
}

void start(raw_ptr self) {
  auto& st = self->state;
  st.t_start = clock_type::now();
  auto window = st.spec.mode == bench_mode::lat ? 1u : st.spec.window;
  for (uint32_t i = 0; i < window && st.issued < st.total; ++i)
    send_one(self);
}

caf::behavior raw_impl(raw_ptr self, transport::transport_actor transport,
                       local_mr payload, run_spec spec, run_channel_ptr chan) {
  auto& st = self->state;
  st.transport = std::move(transport);
  st.payload = std::move(payload);
  st.spec = spec;
  st.chan = std::move(chan);
  st.total = spec.warmup + spec.iters;
  st.header.assign(raw_header_bytes, 0);
  st.header[0] = spec.mode == bench_mode::lat ? echo_flag : sink_flag;
  if (spec.mode == bench_mode::lat)
    st.samples.reserve(spec.iters);
  self->monitor(st.transport);
  self->set_down_handler([self](caf::down_msg& msg) {
    fail(self, msg.reason ? msg.reason
                          : make_error(errc::peer_gone, "transport closed"));
  });
  auto sub = caf::actor_cast<transport::transport_subscriber>(self);
  self->request(st.transport, spec.op_timeout, transport::subscribe_atom::value,
                sub)
      .then([self](transport::link_params&) { start(self); },
            [self](caf::error& err) { fail(self, std::move(err)); });
  return {
      [self](transport::recv_atom, local_mr&) {
        auto& st = self->state;
        if (st.done || st.spec.mode != bench_mode::lat)
          return;
        complete(self, micros(clock_type::now() - st.t_op) / 2);
        if (st.completed == st.total)
          maybe_finish(self);
        else
          send_one(self);
      },
      [self](transport::qp_down_atom, caf::error& err) {
        fail(self, std::move(err));
      },
  };
}

} // namespace

caf::actor spawn_raw_driver(caf::actor_system& sys,
                            transport::transport_actor transport,
                            local_mr payload, run_spec spec,
                            run_channel_ptr chan) {
  return sys.spawn(raw_impl, std::move(transport), std::move(payload), spec,
                   std::move(chan));
}

} // namespace rdmactor::bench
