#include "apps/demo/demo_server.hpp"

#include <chrono>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "apps/demo/digest.hpp"
#include "common/logging.hpp"
#include "rdmactor/error.hpp"

namespace rdmactor::demo {

namespace {

struct server_state {
  connection_actor conn;
  bool done = false;
  uint64_t refused_claims = 0; // lent regions we would not allocate for
  static inline const char* name = "rdmactor.demo.server";
};

using server_ptr = caf::stateful_actor<server_state>*;

/// Ends the server on a fatal error; receive timeouts just loop.
bool fatal(server_ptr self, const caf::error& err) {
  auto code = code_of(err);
  if (code == errc::request_timeout)
    return false;
  self->state.done = true;
  self->quit();
  return true;
}

/// Sends the digest of `len` bytes at `data` back to the client.
void reply_digest(server_ptr self, const uint8_t* data, size_t len) {
  digest d{len, fnv1a(data, len)};
  self->request(self->state.conn, op_timeout, alloc_local_mr_atom::value,
                uint64_t{digest::wire_size}, uint64_t{8})
      .then(
          [self, d](local_mr& mr) {
            d.write_to(mr.data());
            self->request(self->state.conn, op_timeout, send_data_atom::value,
                          mr)
                .then([](uint64_t) {},
                      [self](caf::error& err) { fatal(self, err); });
          },
          [self](caf::error& err) { fatal(self, err); });
}

void data_loop(server_ptr self) {
  self->request(self->state.conn, op_timeout, receive_data_atom::value)
      .then(
          [self](local_mr& chunk) {
            reply_digest(self, chunk.data(), chunk.size());
            data_loop(self);
          },
          [self](caf::error& err) {
            if (!fatal(self, err))
              data_loop(self);
          });
}

void local_mr_loop(server_ptr self) {
  self->request(self->state.conn, op_timeout, receive_local_mr_atom::value)
      .then(
          [self](local_mr& mr) {
            reply_digest(self, mr.data(), mr.size());
            local_mr_loop(self);
          },
          [self](caf::error& err) {
            if (!fatal(self, err))
              local_mr_loop(self);
          });
}

/// Answers a lent region we do not read with `digest::refused()`; logs the
/// first few refusals of the connection.
void refuse_claim(server_ptr self, const caf::error& why) {
  constexpr uint64_t max_logged = 5;
  auto n = ++self->state.refused_claims;
  if (n <= max_logged)
    log().warn("demo server: not reading a lent region: {}{}", render(why),
               n == max_logged ? " (further refusals on this connection are "
                                 "not logged)"
                               : "");
  self->request(self->state.conn, op_timeout, alloc_local_mr_atom::value,
                uint64_t{digest::wire_size}, uint64_t{8})
      .then(
          [self](local_mr& mr) {
            digest::refused().write_to(mr.data());
            self->request(self->state.conn, op_timeout, send_data_atom::value,
                          mr)
                .then([](uint64_t) {},
                      [self](caf::error& err) { fatal(self, err); });
          },
          [self](caf::error& err) { fatal(self, err); });
}

void remote_mr_loop(server_ptr self) {
  self->request(self->state.conn, op_timeout, receive_remote_mr_atom::value)
      .then(
          [self](remote_mr& rmr) {
            // Read what the client lent us, answer its digest, then drop the
            // handle: that releases the client's memory.  The length is the
            // client's claim: alloc_for_peer caps what this connection holds
            // for it (rdmactor.peer-max-claim-bytes); over it we refuse this
            // region and keep serving.
            self->request(self->state.conn, op_timeout,
                          alloc_for_peer_atom::value, rmr.size(), uint64_t{64})
                .then(
                    [self, rmr](local_mr& dst) {
                      self->request(self->state.conn, op_timeout,
                                    read_atom::value, dst, rmr)
                          .then(
                              [self, dst](uint64_t) {
                                reply_digest(self, dst.data(), dst.size());
                              },
                              [self](caf::error& err) { fatal(self, err); });
                    },
                    [self](caf::error& err) { refuse_claim(self, err); });
            remote_mr_loop(self);
          },
          [self](caf::error& err) {
            if (!fatal(self, err))
              remote_mr_loop(self);
          });
}

/// Lends the client one region with a known pattern.
void lend_region(server_ptr self) {
  self->request(self->state.conn, op_timeout, alloc_local_mr_atom::value,
                uint64_t{lent_mr_bytes}, uint64_t{64})
      .then(
          [self](local_mr& mr) {
            fill_pattern(mr.data(), mr.size(), lent_mr_seed);
            self->request(self->state.conn, op_timeout, send_mr_atom::value, mr)
                .then([](mr_token) {},
                      [self](caf::error& err) { fatal(self, err); });
          },
          [self](caf::error& err) { fatal(self, err); });
}

caf::behavior server_impl(server_ptr self, connection_actor conn) {
  self->state.conn = conn;
  self->monitor(conn);
  self->set_down_handler([self](caf::down_msg&) {
    self->state.done = true;
    self->quit();
  });
  lend_region(self);
  data_loop(self);
  local_mr_loop(self);
  remote_mr_loop(self);
  return {[](caf::unit_t) {}};
}

caf::behavior acceptor_impl(caf::event_based_actor* self) {
  return {
      [self](accepted_atom, connection_actor& conn) {
        spawn_server(self->system(), conn);
      },
  };
}

} // namespace

caf::actor spawn_server(caf::actor_system& sys, connection_actor conn) {
  return sys.spawn(server_impl, std::move(conn));
}

caf::actor spawn_acceptor(caf::actor_system& sys) {
  return sys.spawn(acceptor_impl);
}

} // namespace rdmactor::demo
