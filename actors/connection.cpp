#include "actors/connection.hpp"

#include <unordered_map>

#include <caf/actor_system.hpp>
#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "common/error.hpp"
#include "common/logging.hpp"

namespace rdmactor {

namespace {

struct connection_state {
  transport::transport_actor transport;
  agent_actor agent;
  allocator_actor allocator;
  transport::link_params link;
  bool closing = false;
  /// WRITEs and READs the transport has not answered yet: failed by the
  /// exit handler, since a promise that dies with this actor would leave
  /// its caller waiting for its own timeout.
  std::unordered_map<uint64_t, caf::typed_response_promise<uint64_t>> ops;
  uint64_t next_op = 0;

  static inline const char* name = "rdmactor.connection";
};

using self_ptr = connection_actor::stateful_pointer<connection_state>;

/// Checks a one-sided operation locally before anything is posted.
caf::error check_one_sided(self_ptr self, const char* what,
                           const local_mr& local, const remote_mr& remote) {
  if (!local.valid() || !remote.valid())
    return make_error(errc::invalid_argument,
                      std::string{what} + " needs a valid local_mr and "
                          + "remote_mr");
  if (remote.state()->agent() != self->state.agent.address())
    return make_error(errc::invalid_argument,
                      std::string{what}
                          + ": the remote_mr belongs to another connection");
  if (remote.state()->done())
    return make_error(errc::invalid_argument,
                      std::string{what}
                          + ": the remote_mr was released or sent back");
  if (local.size() != remote.size())
    return make_error(errc::length_mismatch,
                      std::string{what} + " of " + std::to_string(local.size())
                          + " local bytes to a remote range of "
                          + std::to_string(remote.size())
                          + " bytes; slice them to the same length");
  return {};
}

/// Posts a WRITE or READ and keeps `remote` alive until the transport
/// answers: a user may drop its `remote_mr` right after the call, and the
/// ReleaseMR that its last handle sends must not overtake the operation
/// (the peer would reuse the memory while we still access it).  The
/// transport answers every operation, or fails it when the connection
/// goes, so the request needs no timeout of its own; the user's request
/// has one.
template <class Atom>
caf::typed_response_promise<uint64_t>
one_sided(self_ptr self, Atom a, local_mr local, remote_mr remote) {
  auto rp = self->make_response_promise<uint64_t>();
  auto id = self->state.next_op++;
  self->state.ops.emplace(id, rp);
  auto finish = [self, id, remote](auto&& result) mutable {
    auto i = self->state.ops.find(id);
    if (i == self->state.ops.end())
      return;
    i->second.deliver(std::forward<decltype(result)>(result));
    self->state.ops.erase(i);
  };
  self->request(self->state.transport, caf::infinite, a, std::move(local),
                remote.token())
      .then([finish](uint64_t n) mutable { finish(n); },
            [finish](caf::error& err) mutable { finish(err); });
  return rp;
}

connection_actor::behavior_type
connection_impl(self_ptr self, transport::transport_actor transport,
                transport::link_params link, memory_pool_ptr pool,
                allocator_actor allocator, options opts) {
  auto& st = self->state;
  st.link = std::move(link);
  st.allocator = std::move(allocator);
  st.transport = std::move(transport);
  st.agent = spawn_agent(self->system(), st.transport, st.link, std::move(pool),
                         opts);
  self->link_to(st.transport);
  self->link_to(st.agent);
  self->set_exit_handler([self](caf::exit_msg& msg) {
    auto& st = self->state;
    if (!st.closing) {
      st.closing = true;
      auto reason = msg.reason;
      auto code = code_of(reason);
      if (msg.source != st.agent.address()
          && msg.source != st.transport.address())
        reason = make_error(errc::closed, "connection to " + st.link.peer
                                              + " closed locally");
      else if (code != errc::peer_gone && code != errc::closed)
        reason
            = make_error(errc::peer_gone, "the connection to " + st.link.peer
                                              + " is gone: " + render(reason));
      for (auto& kv : st.ops)
        kv.second.deliver(reason);
      st.ops.clear();
      self->send_exit(st.agent, reason);
      self->send_exit(st.transport, reason);
      if (code_of(reason) == errc::closed)
        log().debug("connection to {} closed", st.link.peer);
      else
        log().info("connection to {} lost: {}", st.link.peer, render(reason));
      self->quit(reason);
    }
  });
  log().info("connected to {} (max message {} B, recv depth {})", st.link.peer,
             st.link.max_message_len_bytes, st.link.recv_depth);
  return {
      [self](alloc_local_mr_atom, uint64_t size, uint64_t align) {
        return self->delegate(self->state.allocator, alloc_atom::value, size,
                              align, transport::access::all);
      },
      [self](request_remote_mr_atom a, uint64_t size, uint64_t align) {
        return self->delegate(self->state.agent, a, size, align);
      },
      [self](send_mr_atom a, local_mr& mr) {
        return self->delegate(self->state.agent, a, std::move(mr));
      },
      [self](send_mr_atom a, remote_mr& mr) {
        return self->delegate(self->state.agent, a, std::move(mr));
      },
      [self](receive_local_mr_atom a) {
        return self->delegate(self->state.agent, a);
      },
      [self](receive_remote_mr_atom a) {
        return self->delegate(self->state.agent, a);
      },
      [self](send_data_atom a, local_mr& mr) {
        return self->delegate(self->state.agent, a, std::move(mr));
      },
      [self](receive_data_atom a) {
        return self->delegate(self->state.agent, a);
      },
      [self](subscribe_data_atom a, data_subscriber& sub) {
        return self->delegate(self->state.agent, a, std::move(sub));
      },
      [self](write_atom a, local_mr& src,
             remote_mr& dst) -> caf::result<uint64_t> {
        if (auto err = check_one_sided(self, "write", src, dst))
          return err;
        return one_sided(self, a, std::move(src), std::move(dst));
      },
      [self](read_atom a, local_mr& dst,
             remote_mr& src) -> caf::result<uint64_t> {
        if (auto err = check_one_sided(self, "read", dst, src))
          return err;
        return one_sided(self, a, std::move(dst), std::move(src));
      },
      [self](release_atom a, remote_mr& mr) {
        return self->delegate(self->state.agent, a, std::move(mr));
      },
      [self](peer_atom) { return self->state.link; },
      [self](stats_atom a) { return self->delegate(self->state.agent, a); },
  };
}

} // namespace

connection_actor
spawn_connection(caf::actor_system& sys, transport::device_ptr dev,
                 transport::queue_pair_ptr qp, memory_pool_ptr pool,
                 allocator_actor allocator, const options& opts) {
  auto link = transport::link_params_of(*qp);
  // Spawned here, not in the connection's first activation: the transport
  // posts its receives before this returns, so a peer may talk to us as
  // soon as the caller learns about the connection.
  auto how = transport::effective_polling(*dev, transport::polling_of(opts));
  auto transport
      = transport::spawn_transport(sys, std::move(dev), std::move(qp), how);
  return sys.spawn(connection_impl, std::move(transport), std::move(link),
                   std::move(pool), std::move(allocator), opts);
}

} // namespace rdmactor
