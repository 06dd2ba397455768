#include "rdmactor/detail/agent.hpp"

#include <limits>

#include <caf/actor_system.hpp>
#include <caf/scheduler/abstract_coordinator.hpp>

#include "actors/connection/agent_state.hpp"
#include "actors/node/remote_mr_access.hpp"
#include "common/logging.hpp"
#include "common/rate_limiter.hpp"
#include "common/tuning.hpp"
#include "scheduling/direct_poll.hpp"
#include "scheduling/link_runner.hpp"

namespace rdmactor {

namespace {

/// Whether a line about a connection's start or end may be written now:
/// peers can open connections at will, so these lines share one budget
/// (with the transport's "connection down").
rate_limiter::verdict connection_log_budget() {
  return shared_log_budget("connections").take(rate_limiter::clock_type::now());
}

} // namespace

namespace agent_detail {

// -- timeouts -----------------------------------------------------------------

/// How often an agent with waiting requests looks for expired ones: a
/// twentieth of the timeout, between 1 and 100 ms.  Calls end between
/// request-timeout-ms and request-timeout-ms plus this interval.
std::chrono::milliseconds sweep_interval(self_ptr self) {
  return std::chrono::milliseconds{
      tuning::sweep_interval_ms(self->state.core->opts().request_timeout_ms)};
}

/// Makes sure one sweep is scheduled.  One timer per agent instead of one
/// per request: a request costs a map entry, not a clock-thread entry and
/// a message that always comes back.
void arm_sweep(self_ptr self) {
  auto& st = self->state;
  if (st.sweep_armed)
    return;
  st.sweep_armed = true;
  self->delayed_send(self, sweep_interval(self), timeout_atom::value);
}

/// Sends the gathered SendData acknowledgements (the runner's tail, see
/// `resume_with_polls`, or a `flush_acks_atom` where the tail could not
/// keep us scheduled).  The flush waits one trip through the worker's
/// queue, so that the user actors we just handed data to (queued first on
/// this worker) run and may answer with a send, and then, if messages wait
/// in our mailbox (such an answer), it goes behind them: our next SendData
/// may carry the acknowledgements (`agent_core::acks_may_ride`) and leave
/// nothing to flush.  The cost where nobody answers: that one trip before
/// the response goes.
void flush_acks(self_ptr self) {
  self->state.core->data().flush_acks();
}

/// Deadlines use the actor system's clock (steady_clock, or the test
/// coordinator's simulated one in the fuzz target).
clock_type::time_point deadline(self_ptr self) {
  return self->clock().now() + self->state.core->request_timeout();
}

/// Ends what waited past its deadline: requests with `request_timeout`,
/// receive calls likewise; re-arms while anything still waits.
void sweep(self_ptr self) {
  auto& st = self->state;
  st.sweep_armed = false;
  auto now = self->clock().now();
  auto next = st.core->expire(now);
  auto why = [self] { return nothing_arrived(self); };
  bool waiting = st.data.expire(now, why);
  waiting = st.local_mrs.expire(now, why) || waiting;
  waiting = st.remote_mrs.expire(now, why) || waiting;
  waiting = st.imms.expire(now, why) || waiting;
  if ((waiting || next != clock_type::time_point::max()) && !st.core->closed())
    arm_sweep(self);
}

// -- shutdown -----------------------------------------------------------------

void shut_down(self_ptr self, const caf::error& cause, bool transport_gone) {
  auto& st = self->state;
  auto& core = *st.core;
  if (core.closed()) {
    // Draining one-sided operations (see drain_one_sided): the
    // transport's end finishes it; other exits wait for that.
    if (st.draining && transport_gone)
      drain_one_sided(self, st.drain_reason, st.drain_error, true);
    return;
  }
  const auto& peer = core.link().peer;
  auto code = code_of(cause);
  // `reason`: what the agent quits with (the down reason users see);
  // `err`: what pending operations fail with.
  caf::error reason;
  caf::error err;
  switch (code) {
    case errc::closed: // by our user, our node, or the last handle
      reason = err = cause;
      break;
    case errc::peer_closed: // the peer's Goodbye
      reason = cause;
      err = make_error(errc::closed, what_of(cause));
      break;
    case errc::peer_gone: // says so already (e.g. the keepalive's)
      reason = err = cause;
      break;
    default:
      reason = err
          = make_error(errc::peer_gone, "the connection to " + peer
                                            + " is gone: " + render(cause));
  }
  // The link goes back to the transport, which closes the queue pair: with
  // our Goodbye behind every frame posted so far when we close, else
  // failing it with `reason`.  Everything held for the peer goes with it
  // and returns to the pool once the queue pair is closed (when the
  // transport's state goes, before its down message reaches us).  Until
  // then the peer may still READ or WRITE these regions through tokens it
  // holds; releasing them earlier would let it reach memory that already
  // has a new owner.
  bool graceful
      = st.give_link_back(reason, code == errc::closed ? &core : nullptr,
                          "closed by the application", core.take_owned());
  core.close(err);
  // Chunks it did not get yet queue in `data`, which fails below.
  detach_handler(self, reason);
  // Proxies quit with the connection's end reason; requests through them
  // fail with what pending operations fail with.
  st.actors->close(reason, err);
  st.data.fail_all(err);
  st.imms.fail_all(err);
  st.local_mrs.fail_all(err);
  for (auto& rmr : st.remote_mrs.items())
    detail::state_of(rmr.value)->take(); // the peer freed it already
  st.remote_mrs.fail_all(err);
  // Normal operation (a close by either side) is quiet at the default
  // log level, as with CAF io; a lost connection is not normal.
  if (code == errc::closed)
    log().debug("connection to {} closed{}", peer,
                graceful ? " (Goodbye sent)" : "");
  else if (code == errc::peer_closed)
    log().debug("connection to {} closed by the peer: {}", peer,
                what_of(reason));
  else if (auto v = connection_log_budget())
    log().info("connection to {} lost: {}{}", peer, render(err),
               suppressed_note(v.denied_before));
  drain_one_sided(self, std::move(reason), std::move(err), transport_gone);
}

void drain_one_sided(self_ptr self, caf::error reason, caf::error err,
                     bool transport_gone) {
  auto& st = self->state;
  if (transport_gone || st.one_sided.empty()) {
    for (auto& kv : st.one_sided)
      kv.second.deliver(err);
    st.one_sided.clear();
    st.draining = false;
    self->quit(reason);
    return;
  }
  // The queue pair may still place a pending READ's data (or an atomic's
  // old value) into the caller's buffer until the transport has closed it:
  // failing the operation now would let the caller reuse the buffer while
  // the fabric writes to it.  The transport answers every operation or
  // fails it as it closes (within close-timeout-ms on a graceful close, at
  // once otherwise); its exit (we are linked) then ends the drain.
  st.draining = true;
  st.drain_reason = std::move(reason);
  st.drain_error = std::move(err);
}

namespace {

agent_actor::behavior_type agent_impl(self_ptr self, lent_link lent,
                                      link_params link, memory_pool_ptr pool,
                                      allocator_actor allocator, options opts,
                                      actor_directory_ptr node_actors,
                                      uint64_t node) {
  auto& st = self->state;
  st.transport = std::move(lent.transport);
  st.allocator = std::move(allocator);
  st.core.emplace(st.sink, std::move(opts), std::move(link), std::move(pool));
  st.core->live().set_node(node);
  st.driver.init(transport::usable_polling(self->home_system(), lent.how),
                 &st.runner_flags->wanted);
  if (lent.link != nullptr)
    st.driver.start(*lent.link, st.events,
                    caf::actor_cast<caf::weak_actor_ptr>(self), st.direct);
  start_remote_actors(self, std::move(node_actors));
  self->link_to(st.transport);
  // An exit from anyone but our transport is a local close (the user's
  // send_exit); the transport's carries why the connection failed.
  self->set_exit_handler([self](caf::exit_msg& msg) {
    auto& st = self->state;
    bool from_transport = msg.source == st.transport.address();
    if (!from_transport || !msg.reason)
      shut_down(self,
                make_error(errc::closed, "connection to " + st.core->link().peer
                                             + " closed locally"),
                from_transport);
    else
      shut_down(self, msg.reason, true);
  });
  // The transport is monitored too: a drain (drain_one_sided) waits for
  // its end, and an exit we sent it unlinks us (CAF drops the link to an
  // exit's sender), so only a monitor tells us when it has terminated.
  self->monitor(st.transport);
  self->set_down_handler([self](caf::down_msg& msg) {
    auto& st = self->state;
    if (msg.source == st.transport.address()) {
      shut_down(self,
                msg.reason ? msg.reason
                           : make_error(errc::closed, "connection to "
                                                          + st.core->link().peer
                                                          + " closed locally"),
                true);
      return;
    }
    if (st.subscriber && msg.source == st.subscriber.address())
      st.subscriber = data_subscriber{};
    if (st.chunk_sub && msg.source == st.chunk_sub.address())
      st.chunk_sub = chunk_subscriber{};
  });
  st.core->start(); // our Hello
  const auto& lp = st.core->link();
  log().debug("connected to {} (max message {} B, recv depth {})", lp.peer,
              lp.max_message_len_bytes, lp.recv_depth);
  return {
      // The data path first: CAF 0.17 tries a behavior's handlers in order
      // (a type check each, then the atom), so a frame, a held ack flush or
      // a send found at the end of this list cost about a hundred failed
      // matches per send round trip (callgrind).
      [self](transport::poll_atom) {
        self->state.driver.drain();
        self->state.yield_now = true;
        after_poll(self, true);
      },
      [self](transport::cq_event_atom) {
        // The notification consumed the arming.
        self->state.driver.notified();
        after_poll(self, true);
      },
      [self](flush_acks_atom) { flush_acks(self); },
      [self](send_data_atom, local_mr& mr) { return send_data(self, mr); },
      [self](transport::repost_atom, uint32_t) {
        self->state.driver.reclaim();
      },
      [self](actor_out_atom) { post_actor_messages(self); },
      [self](actor_ack_atom) {
        uint64_t messages = 0;
        uint64_t bytes = 0;
        if (self->state.actors->inflow().take_ack(messages, bytes))
          self->state.core->actors().post_ack(messages, bytes);
      },
      [self](timeout_atom) { sweep(self); },
      [self](transport::tick_atom) { on_keepalive(self); },
      // The rest.
      [self](alloc_local_mr_atom, uint64_t size, uint64_t align) {
        return self->delegate(self->state.allocator, alloc_atom::value, size,
                              align, transport::access::all);
      },
      [self](alloc_local_mr_atom, uint64_t size, uint64_t align,
             uint32_t access) {
        return alloc_local_mr(self, size, align, access);
      },
      [self](write_with_imm_atom, local_mr& src, remote_mr& dst, uint32_t imm) {
        return write_with_imm(self, std::move(src), std::move(dst), imm);
      },
      [self](send_mr_atom, local_mr& mr, uint64_t tag) {
        return send_local_mr(self, mr, tag);
      },
      [self](send_mr_atom, local_mr& mr, uint64_t tag, uint32_t lease_ms) {
        return send_local_mr(self, mr, tag, lease_ms);
      },
      [self](renew_lease_atom, remote_mr& mr, uint32_t lease_ms) {
        return renew_lease(self, std::move(mr), lease_ms);
      },
      [self](send_mr_atom, remote_mr& mr, uint64_t tag) {
        return send_remote_mr(self, mr, tag);
      },
      [self](receive_tagged_local_mr_atom) {
        return take_as<local_mr, uint64_t>(
            self, self->state.local_mrs, [](auto& rp, tagged<local_mr>&& x) {
              rp.deliver(std::move(x.value), x.tag);
            });
      },
      [self](receive_tagged_remote_mr_atom) {
        return take_as<remote_mr, uint64_t>(
            self, self->state.remote_mrs, [](auto& rp, tagged<remote_mr>&& x) {
              rp.deliver(std::move(x.value), x.tag);
            });
      },
      [self](send_data_atom, local_mr& mr, uint32_t imm) {
        return send_data(self, mr, imm);
      },
      [self](receive_imm_atom) -> caf::result<uint32_t, uint64_t, local_mr> {
        if (self->state.chunk_sub)
          return make_error(errc::invalid_argument,
                            "the immediate values of this connection go to "
                            "a chunk_subscriber (subscribe_data); unsubscribe "
                            "with an invalid handle to call receive_imm");
        return take_as<uint32_t, uint64_t, local_mr>(
            self, self->state.imms, [](auto& rp, imm_item&& x) {
              rp.deliver(x.imm, x.bytes, std::move(x.chunk));
            });
      },
      [self](subscribe_data_atom, chunk_subscriber& sub) {
        return subscribe_chunks(self, std::move(sub));
      },
      [self](alloc_for_peer_atom, uint64_t size, uint64_t align) {
        return alloc_for_peer(self, size, align);
      },
      [self](write_atom, local_mr& src, remote_mr& dst) {
        return write_to_peer(self, std::move(src), std::move(dst));
      },
      [self](read_atom, local_mr& dst, remote_mr& src) {
        return read_from_peer(self, std::move(dst), std::move(src));
      },
      [self](fetch_add_atom, remote_mr& word, uint64_t add) {
        return fetch_add_on_peer(self, std::move(word), add);
      },
      [self](compare_swap_atom, remote_mr& word, uint64_t expected,
             uint64_t desired) {
        return compare_swap_on_peer(self, std::move(word), expected, desired);
      },
      [self](peer_atom) { return self->state.core->link(); },
      [self](request_remote_mr_atom, uint64_t size, uint64_t align) {
        return request_remote_mr(self, size, align);
      },
      [self](send_mr_atom, local_mr& mr) { return send_local_mr(self, mr); },
      [self](send_mr_atom, remote_mr& mr) { return send_remote_mr(self, mr); },
      [self](receive_local_mr_atom) {
        return take_as<local_mr>(self, self->state.local_mrs,
                                 [](auto& rp, tagged<local_mr>&& x) {
                                   rp.deliver(std::move(x.value));
                                 });
      },
      [self](receive_remote_mr_atom) {
        return take_as<remote_mr>(self, self->state.remote_mrs,
                                  [](auto& rp, tagged<remote_mr>&& x) {
                                    rp.deliver(std::move(x.value));
                                  });
      },
      [self](send_data_atom, const std::vector<std::byte>& bytes) {
        return send_bytes(self, bytes.data(), bytes.size(), std::nullopt);
      },
      [self](send_data_atom, const std::vector<char>& bytes) {
        return send_bytes(self, bytes.data(), bytes.size(), std::nullopt);
      },
      [self](send_data_atom, const std::string& bytes) {
        return send_bytes(self, bytes.data(), bytes.size(), std::nullopt);
      },
      [self](send_data_atom, const std::vector<std::byte>& bytes,
             uint32_t imm) {
        return send_bytes(self, bytes.data(), bytes.size(), imm);
      },
      [self](receive_data_atom) -> caf::result<local_mr> {
        if (self->state.subscriber || self->state.chunk_sub
            || self->state.handler)
          return make_error(errc::invalid_argument,
                            "the data of this connection goes to a "
                            "subscriber (subscribe_data); unsubscribe with "
                            "an invalid handle to call receive_data");
        return take(self, self->state.data);
      },
      [self](subscribe_data_atom, data_subscriber& sub) {
        return subscribe_data(self, std::move(sub));
      },
      [self](subscribe_data_atom, data_handler_ptr& handler) {
        return subscribe_handler(self, std::move(handler));
      },
      [self](release_atom, remote_mr& mr) -> caf::result<uint64_t> {
        if (auto err = check_remote(self, mr, remote_use::release, "release")) {
          if (code_of(err) == errc::lease_expired)
            detail::state_of(mr)->take(); // revoked: nothing to release
          return err;
        }
        if (!detail::state_of(mr)->take())
          return make_error(errc::already_sent,
                            "this remote_mr was already released or sent");
        return release(self, detail::state_of(mr)->token(), true);
      },
      [self](stats_atom) {
        auto& st = self->state;
        auto s = st.core->stats();
        s.queued_data = st.data.queued();
        s.queued_local_mrs = st.local_mrs.queued();
        s.queued_remote_mrs = st.remote_mrs.queued();
        s.queued_data_bytes = st.data.queued_bytes() + st.imms.queued_bytes();
        s.peer_claim_bytes = st.claimed->load();
        s.queued_imms = st.imms.queued();
        if (st.driver.driving()) {
          s.packed_messages_sent = st.driver.path().packed_messages();
          s.packed_frames_sent = st.driver.path().packed_sends();
        }
        auto f = st.actors->flow_stats();
        s.actor_buffered = f.buffered;
        s.actor_buffered_max = f.buffered_max;
        s.actor_queued = f.queued;
        s.actor_queued_bytes = f.queued_bytes;
        s.actor_in_flight = f.in_flight;
        s.actor_send_refused = f.send_refused;
        s.actor_acks_sent = f.acks_sent;
        s.actor_acks_received = f.acks_received;
        return s;
      },
      [self](release_atom, mr_token token) {
        if (!self->state.core->closed())
          release(self, token, false);
      },
      [self](transport::qp_down_atom, caf::error& err) {
        shut_down(self, err);
      },
      [self](publish_atom, const std::string& name, const caf::actor& actor) {
        return publish_actor(self, name, actor);
      },
      [self](unpublish_atom, const std::string& name) {
        return self->state.actors->published().erase(name);
      },
      [self](lookup_atom, std::string& name) {
        return lookup_actor(self, name, {});
      },
      [self](lookup_atom, std::string& name, std::vector<std::string>& ifs) {
        return lookup_actor(self, name, std::move(ifs));
      },
  };
}

/// The agent as a class: the behavior of `agent_impl`, run by the runner
/// of every actor that drives a link (scheduling/link_runner.hpp), which
/// also gives its worker back early: after it delivered
/// `tuning::agent_yield_after_bytes` of actor messages in an activation,
/// it returns `resume_later` (the worker runs the targets, which the
/// deliveries put in its queue, and resumes the agent after them).  Its
/// work without messages: the held acknowledgement flush (the tail), the
/// CQ's notification and polls.
class agent_runner : public transport::link_runner<
                         agent_runner, agent_actor,
                         caf::stateful_actor<agent_state, agent_actor::base>,
                         flush_acks_atom> {
public:
  using super = transport::link_runner<
      agent_runner, agent_actor,
      caf::stateful_actor<agent_state, agent_actor::base>, flush_acks_atom>;

  agent_runner(caf::actor_config& cfg, lent_link transport, link_params link,
               memory_pool_ptr pool, allocator_actor allocator, options opts,
               actor_directory_ptr node_actors, uint64_t node)
      : super(cfg), transport_(std::move(transport)), link_(std::move(link)),
        pool_(std::move(pool)), allocator_(std::move(allocator)),
        opts_(std::move(opts)), node_actors_(std::move(node_actors)),
        node_(node) {}

  behavior_type make_behavior() override {
    state.runner_flags = &polls();
    state.direct = transport::direct_wake_for(home_system(), this);
    return agent_impl(this, std::move(transport_), std::move(link_),
                      std::move(pool_), std::move(allocator_), std::move(opts_),
                      std::move(node_actors_), node_);
  }

  void begin_activation() {
    state.activation_delivered_bytes = 0;
    state.yield_now = false;
  }

  bool should_yield() const {
    return state.yield_now
           || state.activation_delivered_bytes
                  >= tuning::agent_yield_after_bytes;
  }

  void side_work(const transport::due_work& w) {
    if (w.tail)
      flush_acks(this);
    if (w.notified)
      state.driver.notified(); // drains too
    else if (w.poll)
      state.driver.drain();
    if (w.notified || w.poll)
      after_poll(this, false);
  }

private:
  lent_link transport_;
  link_params link_;
  memory_pool_ptr pool_;
  allocator_actor allocator_;
  options opts_;
  actor_directory_ptr node_actors_;
  uint64_t node_;
};

} // namespace

} // namespace agent_detail

agent_actor spawn_agent(caf::actor_system& sys, transport::lent_link transport,
                        transport::link_params link, memory_pool_ptr pool,
                        allocator_actor allocator, const options& opts,
                        actor_directory_ptr node_actors, uint64_t node) {
  return sys.spawn<agent_detail::agent_runner>(
      std::move(transport), std::move(link), std::move(pool),
      std::move(allocator), opts, std::move(node_actors), node);
}

} // namespace rdmactor
