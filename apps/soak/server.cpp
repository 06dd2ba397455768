#include "apps/soak/server.hpp"

#include <chrono>
#include <iostream>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "apps/soak/payload.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor::soak {

namespace {

struct service_state {
  connection_actor conn;
  std::shared_ptr<server_counters> counters;
  chunk_checker data;
  static inline const char* name = "rdmactor.soak.service";
};

using service_ptr = caf::stateful_actor<service_state>*;

/// Loops again after a receive timeout; stops the service otherwise.
bool keep_going(service_ptr self, const caf::error& err) {
  if (code_of(err) == errc::request_timeout)
    return true;
  self->quit();
  return false;
}

void data_loop(service_ptr self) {
  self->request(self->state.conn, op_timeout, receive_data_atom::value)
      .then(
          [self](local_mr& chunk) {
            auto& st = self->state;
            auto before = st.data.completed;
            if (!st.data.feed(chunk.data(), chunk.size())) {
              ++st.counters->corrupt_data;
              st.data = chunk_checker{};
            }
            ++st.counters->data_chunks;
            st.counters->data_payloads += st.data.completed - before;
            data_loop(self);
          },
          [self](caf::error& err) {
            if (keep_going(self, err))
              data_loop(self);
          });
}

void lent_loop(service_ptr self) {
  self->request(self->state.conn, op_timeout, receive_remote_mr_atom::value)
      .then(
          [self](remote_mr& rmr) {
            // The length is the client's claim: alloc_for_peer caps what
            // this connection holds for it (peer-max-claim-bytes); over it
            // the region is counted as refused, released, and we go on.
            auto conn = self->state.conn;
            self->request(conn, op_timeout, alloc_for_peer_atom::value,
                          rmr.size(), uint64_t{64})
                .then(
                    [self, conn, rmr](local_mr& dst) {
                      // Keep `rmr` until the read completed: dropping it
                      // releases the region, and the release may overtake
                      // the read's data (docs/reliability.md, findings).
                      self->request(conn, op_timeout, read_atom::value, dst,
                                    rmr)
                          .then(
                              [self, dst, rmr](uint64_t) {
                                auto& c = *self->state.counters;
                                if (check_payload(dst.data(), dst.size())) {
                                  ++c.lent_regions;
                                } else if (++c.corrupt_lent <= 10) {
                                  std::cerr << "rdmactor-soak: lent region "
                                               "read wrong: "
                                            << describe_payload(dst.data(),
                                                                dst.size())
                                            << "\n";
                                }
                              },
                              [](caf::error&) {
                                // the connection failed: not a content error
                              });
                    },
                    [self](caf::error& err) {
                      auto& c = *self->state.counters;
                      if (++c.refused_lent <= 10)
                        std::cerr << "rdmactor-soak: lent region not read: "
                                  << render(err) << "\n";
                    });
            lent_loop(self);
          },
          [self](caf::error& err) {
            if (keep_going(self, err))
              lent_loop(self);
          });
}

void returned_loop(service_ptr self) {
  self->request(self->state.conn, op_timeout, receive_local_mr_atom::value)
      .then(
          [self](local_mr& mr) {
            auto& c = *self->state.counters;
            if (check_payload(mr.data(), mr.size()))
              ++c.returned_regions;
            else
              ++c.corrupt_returned;
            returned_loop(self);
          },
          [self](caf::error& err) {
            if (keep_going(self, err))
              returned_loop(self);
          });
}

caf::behavior service_impl(service_ptr self, connection_actor conn,
                           std::shared_ptr<server_counters> counters) {
  self->state.conn = conn;
  self->state.counters = std::move(counters);
  ++self->state.counters->connections;
  self->monitor(conn);
  self->set_down_handler([self](caf::down_msg&) { self->quit(); });
  data_loop(self);
  lent_loop(self);
  returned_loop(self);
  return {[](caf::unit_t) {}};
}

caf::behavior acceptor_impl(caf::event_based_actor* self,
                            std::shared_ptr<server_counters> counters) {
  return {
      [self, counters](accepted_atom, connection_actor& conn) {
        self->system().spawn(service_impl, conn, counters);
      },
  };
}

} // namespace

caf::actor spawn_soak_acceptor(caf::actor_system& sys,
                               std::shared_ptr<server_counters> counters) {
  return sys.spawn(acceptor_impl, std::move(counters));
}

} // namespace rdmactor::soak
