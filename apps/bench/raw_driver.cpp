#include "apps/bench/raw_driver.hpp"

#include <chrono>
#include <vector>

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "apps/bench/run_channel.hpp"
#include "apps/bench/run_progress.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor::bench {

namespace {

using clock_type = run_progress::clock_type;

struct raw_state {
  transport::transport_actor transport;
  run_progress run;
  local_mr payload;
  std::vector<uint8_t> header;
  clock_type::time_point t_op;

  static inline const char* name = "rdmactor.bench.raw_driver";
};

using raw_ptr = caf::stateful_actor<raw_state>*;

void fail(raw_ptr self, caf::error err) {
  if (self->state.run.fail(std::move(err)))
    self->quit();
}

void maybe_finish(raw_ptr self) {
  if (self->state.run.finish_if_done())
    self->quit();
}

/// Sends one message; in bw mode its completion completes an operation.
void send_one(raw_ptr self) {
  auto& st = self->state;
  st.run.issued();
  ++st.run.acks_pending;
  st.t_op = clock_type::now();
  auto t0 = st.t_op;
  self->request(st.transport, no_caf_timeout, transport::send_atom::value,
                st.header, st.payload)
      .then(
          [self, t0](uint64_t) {
            auto& run = self->state.run;
            --run.acks_pending;
            if (run.done())
              return;
            if (run.spec().mode == bench_mode::bw) {
              run.complete(run_progress::micros_since(t0));
              if (run.more_to_issue())
                send_one(self);
            }
            maybe_finish(self);
          },
          [self](caf::error& err) { fail(self, std::move(err)); });
}

void start(raw_ptr self) {
  auto& run = self->state.run;
  run.start_clock();
  auto window = run.spec().mode == bench_mode::lat ? 1u : run.spec().window;
  for (uint32_t i = 0; i < window && run.more_to_issue(); ++i)
    send_one(self);
}

caf::behavior raw_impl(raw_ptr self, transport::transport_actor transport,
                       local_mr payload, run_spec spec, run_channel_ptr chan) {
  auto& st = self->state;
  st.transport = std::move(transport);
  st.payload = std::move(payload);
  st.run = run_progress{spec, std::move(chan)};
  st.header.assign(raw_header_bytes, 0);
  st.header[0] = spec.mode == bench_mode::lat ? echo_flag : sink_flag;
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
        if (st.run.done() || st.run.spec().mode != bench_mode::lat)
          return;
        st.run.complete(run_progress::micros_since(st.t_op) / 2);
        if (st.run.all_completed())
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
