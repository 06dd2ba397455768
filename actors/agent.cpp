#include "actors/agent.hpp"

#include <caf/actor_system.hpp>

#include "actors/agent_state.hpp"
#include "common/logging.hpp"

namespace rdmactor {

namespace agent_detail {

// -- shutdown
// -------------------------------------------------------------------

void shut_down(self_ptr self, const caf::error& cause) {
  auto& st = self->state;
  if (st.down)
    return;
  st.down = true;
  auto err
      = code_of(cause) == errc::closed
            ? cause
            : make_error(errc::peer_gone, "the connection to " + st.link.peer
                                              + " is gone: " + render(cause));
  auto pending = std::move(st.pending);
  st.pending.clear();
  for (auto& kv : pending)
    kv.second.done(nullptr, err);
  for (auto& kv : st.one_sided)
    kv.second.deliver(err);
  st.one_sided.clear();
  fail_all(st.data, err);
  fail_all(st.local_mrs, err);
  for (auto& rmr : st.remote_mrs.items)
    rmr.state()->take(); // the peer freed it already
  fail_all(st.remote_mrs, err);
  // Everything held for the peer returns to the pool once the transport
  // has terminated, i.e. after its queue pair is closed (CAF destroys an
  // actor's state, and with it the QP, before it runs the actor's
  // attachables).  Until then the peer may still READ or WRITE these
  // regions through tokens it holds; releasing them earlier would let it
  // reach memory that already has a new owner.
  agent_state::hand_to_transport(st.transport, std::move(st.owned));
  st.owned.clear();
  st.peer_alloc_bytes = 0;
  st.peer_mrs = 0;
  if (code_of(err) == errc::closed)
    log().debug("connection to {} closed", st.link.peer);
  else
    log().info("connection to {} lost: {}", st.link.peer, render(err));
  self->send_exit(st.transport, err);
  self->quit(err);
}

namespace {

agent_actor::behavior_type agent_impl(self_ptr self, transport_actor transport,
                                      link_params link, memory_pool_ptr pool,
                                      allocator_actor allocator, options opts) {
  auto& st = self->state;
  st.transport = std::move(transport);
  st.link = std::move(link);
  st.pool = std::move(pool);
  st.allocator = std::move(allocator);
  st.opts = std::move(opts);
  self->link_to(st.transport);
  // An exit from anyone but our transport is a local close (the user's
  // send_exit); the transport's carries why the connection failed.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    auto& st = self->state;
    if (msg.source != st.transport.address() || !msg.reason)
      shut_down(self, make_error(errc::closed, "connection to " + st.link.peer
                                                   + " closed locally"));
    else
      shut_down(self, msg.reason);
  });
  // The only actor the agent monitors is its data subscriber.
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& st = self->state;
    if (st.subscriber && msg.source == st.subscriber.address())
      st.subscriber = data_subscriber{};
  });
  // Weakly: the transport must not keep us alive (we hold it, and our
  // users' handles decide when the connection ends).  No CAF timeout on
  // this request: CAF's clock holds a strong reference to the requester
  // until a request's timeout is due, even after the answer, which would
  // keep a dropped connection open for request-timeout-ms.  The transport
  // answers at once, and if it is gone the link ends us anyway.
  transport::transport_subscriber sub = self;
  self->request(st.transport, caf::infinite,
                transport::subscribe_weak_atom::value, sub)
      .then([](transport::link_params&) {},
            [self](caf::error& err) { shut_down(self, err); });
  send_unsolicited(self, pb::make_hello(pb::protocol_version,
                                        st.link.max_message_len_bytes,
                                        st.link.recv_depth,
                                        /*cumulative_acks=*/true));
  log().info("connected to {} (max message {} B, recv depth {})", st.link.peer,
             st.link.max_message_len_bytes, st.link.recv_depth);
  return {
      [self](alloc_local_mr_atom, uint64_t size, uint64_t align) {
        return self->delegate(self->state.allocator, alloc_atom::value, size,
                              align, transport::access::all);
      },
      [self](write_atom, local_mr& src, remote_mr& dst) {
        return write_to_peer(self, std::move(src), std::move(dst));
      },
      [self](read_atom, local_mr& dst, remote_mr& src) {
        return read_from_peer(self, std::move(dst), std::move(src));
      },
      [self](peer_atom) { return self->state.link; },
      [self](request_remote_mr_atom, uint64_t size, uint64_t align) {
        return request_remote_mr(self, size, align);
      },
      [self](send_mr_atom, local_mr& mr) { return send_local_mr(self, mr); },
      [self](send_mr_atom, remote_mr& mr) { return send_remote_mr(self, mr); },
      [self](receive_local_mr_atom) {
        return take(self, self->state.local_mrs);
      },
      [self](receive_remote_mr_atom) {
        return take(self, self->state.remote_mrs);
      },
      [self](send_data_atom, local_mr& mr) { return send_data(self, mr); },
      [self](receive_data_atom) -> caf::result<local_mr> {
        if (self->state.subscriber)
          return make_error(errc::invalid_argument,
                            "the data of this connection goes to a "
                            "subscriber (subscribe_data); unsubscribe with "
                            "an invalid handle to call receive_data");
        return take(self, self->state.data);
      },
      [self](subscribe_data_atom, data_subscriber& sub) {
        return subscribe_data(self, std::move(sub));
      },
      [self](release_atom, remote_mr& mr) -> caf::result<uint64_t> {
        if (!mr.valid() || mr.state()->agent() != self->address())
          return make_error(errc::invalid_argument,
                            "this remote_mr belongs to another connection");
        if (!mr.state()->take())
          return make_error(errc::already_sent,
                            "this remote_mr was already released or sent");
        return release(self, mr.state()->token(), true);
      },
      [self](stats_atom) {
        auto& st = self->state;
        auto s = st.counters;
        s.owned_mrs = st.owned.size();
        s.pending_requests = st.pending.size();
        s.queued_data = st.data.items.size();
        s.queued_local_mrs = st.local_mrs.items.size();
        s.queued_remote_mrs = st.remote_mrs.items.size();
        s.peer_alloc_bytes = st.peer_alloc_bytes;
        s.queued_data_bytes = st.data.queued_bytes;
        return s;
      },
      [self](release_atom, mr_token token) {
        if (!self->state.down)
          release(self, token, false);
      },
      [self](timeout_atom) { sweep(self); },
      [self](flush_acks_atom) { flush_acks(self); },
      [self](transport::recv_atom, local_mr& buf) { on_message(self, buf); },
      [self](transport::qp_down_atom, caf::error& err) {
        shut_down(self, err);
      },
  };
}

} // namespace

} // namespace agent_detail

agent_actor spawn_agent(caf::actor_system& sys,
                        transport::transport_actor transport,
                        transport::link_params link, memory_pool_ptr pool,
                        allocator_actor allocator, const options& opts) {
  return sys.spawn(agent_detail::agent_impl, std::move(transport),
                   std::move(link), std::move(pool), std::move(allocator),
                   opts);
}

} // namespace rdmactor
